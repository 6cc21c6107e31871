#pragma once
// What a sequence may sample, when something constrains it (its grammar): the TokenFilter of the
// next step, told how many tokens the output may still have and each token drawn. The sampling
// layer sees only this interface, so grammars sit above it (engine/grammar).

#include <cstdint>

#include "engine/sampling/sampler.h"

namespace pagoda {

class TokenConstraint : public TokenFilter {
 public:
  // False while the constraint lets every token through (a lazy grammar waiting for its
  // trigger); it is still told every token drawn.
  virtual bool active() const = 0;
  // How many more tokens the output may have, counting the next: set before each draw.
  virtual void set_budget(int32_t tokens_left) = 0;
  // Advances past a drawn token.
  virtual void accept(int32_t token) = 0;
};

}  // namespace pagoda
