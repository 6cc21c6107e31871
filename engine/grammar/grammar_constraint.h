#pragma once
// One request's grammar while it decodes (Request::grammar / json_schema): the matcher's state
// after the output so far, and the tokens it allows next, as the sampler's TokenFilter.
//
// The end-of-generation and stop tokens are allowed exactly when the text so far is a complete
// sentence of the grammar, so an output ended by one of them always parses. A lazy constraint
// (Request::grammar_triggers) lets the output run free until a trigger string appears in it,
// then feeds the matcher the text from the trigger's first byte on and constrains from there.
//
// The state depends on the request's own tokens only, so a constrained request samples the
// same tokens whatever shares its batch. Owned by one Sequence; not thread-safe.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/grammar/grammar_matcher.h"
#include "engine/request/sampler.h"

namespace pagoda {
class Tokenizer;
}

namespace pagoda::grammar {

class TokenMask;

class GrammarConstraint final : public TokenFilter {
 public:
  // `mask` is `grammar`'s over the tokenizer's vocabulary. `ending_ids`: the tokens that end the output (the vocabulary's end-of-generation ids unless
  // the request ignores them, and its stop ids). `tokenizer` must outlive the constraint.
  GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenMask> mask,
                    const Tokenizer& tokenizer, std::vector<int32_t> ending_ids, std::vector<std::string> triggers);

  // False while a lazy constraint waits for its trigger: the sampler then needs no filter.
  bool active() const { return active_; }

  bool allows(int32_t token) override;
  std::span<const uint64_t> mask() override;

  // Advances past a drawn token (an ending token is not text and changes nothing). A token the
  // grammar refuses leaves the constraint allowing nothing more, which ends the output.
  void accept(int32_t token);

 private:
  bool is_ending(int32_t token) const;
  void look_for_trigger(size_t searched_from);

  std::shared_ptr<const TokenMask> mask_;  // the grammar's, shared by its requests
  const Tokenizer* tokenizer_;
  std::vector<int32_t> ending_ids_;  // sorted
  std::vector<std::string> triggers_;
  GrammarMatcher matcher_;
  bool active_;
  bool dead_ = false;            // the grammar refused the text: nothing is allowed any more
  std::string untriggered_;      // a lazy constraint's output so far, searched for triggers
  std::vector<uint64_t> bits_;   // the last mask
  bool bits_valid_ = false;      // bits_ is the mask of the current state
};

}  // namespace pagoda::grammar
