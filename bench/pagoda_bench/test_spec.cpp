#include "bench/pagoda_bench/test_spec.h"

#include "pagoda/error.h"

namespace pagoda::benchtool {

std::string TestSpec::name() const {
  std::string name;
  if (n_prompt > 0) name = "pp" + std::to_string(n_prompt);
  if (n_prompt > 0 && n_gen > 0) name += "+";
  if (n_gen > 0) name += "tg" + std::to_string(n_gen);
  if (kind == TestKind::Batched) name += " x" + std::to_string(n_seqs);
  if (n_depth > 0) name += " @ d" + std::to_string(n_depth);
  return name;
}

int TestSpec::fresh_prompt() const {
  const int prompt = kind == TestKind::Generation ? 0 : n_prompt;
  return prompt == 0 && n_depth == 0 ? 1 : prompt;
}

int TestSpec::max_new_tokens() const { return kind == TestKind::Prompt ? 1 : n_gen + 1; }

std::vector<TestSpec> plan_tests(const Options& o) {
  std::vector<TestSpec> tests;
  for (int depth : o.n_depth) {
    if (o.n_seqs.empty()) {
      for (int p : o.n_prompt)
        if (p > 0) tests.push_back({TestKind::Prompt, p, 0, depth, 1});
      for (int n : o.n_gen)
        if (n > 0) tests.push_back({TestKind::Generation, 0, n, depth, 1});
      continue;
    }
    for (int b : o.n_seqs)
      for (int p : o.n_prompt)
        for (int n : o.n_gen)
          if (p > 0 || n > 0) tests.push_back({TestKind::Batched, p, n, depth, b});
  }
  if (tests.empty()) throw Error("nothing to run: every -p and -n is 0");
  return tests;
}

}  // namespace pagoda::benchtool
