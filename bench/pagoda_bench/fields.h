#pragma once
// One result as llama-bench's named, typed fields (its JSON, JSONL and CSV columns, in its
// order), then pagoda's own: n_seqs, the -B phase rates and the rooflines.

#include <optional>
#include <string>
#include <vector>

#include "bench/pagoda_bench/engine_setup.h"
#include "bench/pagoda_bench/machine.h"
#include "bench/pagoda_bench/model_facts.h"
#include "bench/pagoda_bench/roofline.h"
#include "bench/pagoda_bench/test_result.h"

namespace pagoda::benchtool {

// Everything one output row says.
struct Row {
  const Machine& machine;
  const ModelFacts& model;
  const Instance& instance;
  const TestResult& result;
  Roofline roofline;
};

struct Field {
  enum class Kind { String, Bool, Int, Float };
  const char* name;
  Kind kind;
  std::optional<std::string> value;  // as llama-bench prints it ("1" for true); nullopt where
                                     // a pagoda field does not apply to the test
};

std::vector<Field> fields(const Row& row);

// The commit pagoda-bench was built from and the number of commits up to it, as llama-bench's
// build_commit and build_number.
std::string build_commit();
int build_number();

}  // namespace pagoda::benchtool
