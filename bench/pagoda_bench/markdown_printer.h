#pragma once
// llama-bench's markdown table: model, size, params, backend, threads, the parameters given
// other values than their defaults, test, t/s; then pagoda's columns: S_PP and S_TG with -B,
// and the fraction reached of the bandwidth roofline (decode) and of the FMA peak (prefill).

#include <functional>
#include <string>
#include <vector>

#include "bench/pagoda_bench/printers.h"

namespace pagoda::benchtool {

class MarkdownPrinter : public Printer {
 public:
  explicit MarkdownPrinter(const Options& options);
  void header() override;
  void row(const Row& row) override;
  void footer() override;

 private:
  struct Column {
    const char* name;
    int width;  // printf's: negative is left-aligned
    std::function<std::string(const Row&)> cell;
    int extra_bytes = 0;  // right-aligned cells: bytes of their text that take no column
  };
  std::vector<Column> columns_;
};

}  // namespace pagoda::benchtool
