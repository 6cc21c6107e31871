#pragma once
// The output formats, each written to stdout as llama-bench writes it, a row as soon as its
// test is done: md (its table, with pagoda's roofline columns after t/s), json, jsonl, csv.

#include <memory>

#include "bench/pagoda_bench/fields.h"
#include "bench/pagoda_bench/options.h"

namespace pagoda::benchtool {

class Printer {
 public:
  virtual ~Printer() = default;
  virtual void header() {}
  virtual void row(const Row& row) = 0;
  virtual void footer() {}
};

std::unique_ptr<Printer> make_printer(const Options& options);

}  // namespace pagoda::benchtool
