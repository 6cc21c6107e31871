#include "support/oracle.h"

#include "testing/reference_model.h"
#include "engine/sampling/sampler.h"

namespace pagoda::test {

std::vector<int32_t> oracle_greedy(const Model& m, const std::vector<int32_t>& prompt, int32_t n) {
  ReferenceModel oracle(m);
  std::vector<int32_t> tokens = prompt, out;
  for (size_t pos = 0; out.size() < size_t(n); ++pos) {
    const auto& logits = oracle.forward(tokens[pos], int32_t(pos));
    if (pos + 1 >= tokens.size()) {
      out.push_back(argmax(logits));
      tokens.push_back(out.back());
    }
  }
  return out;
}

}  // namespace pagoda::test
