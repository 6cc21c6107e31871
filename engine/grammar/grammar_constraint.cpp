#include "engine/grammar/grammar_constraint.h"

#include <algorithm>

#include "engine/grammar/token_mask.h"
#include "engine/tokenizer/tokenizer.h"

namespace pagoda::grammar {

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenMask> mask,
                                     const Tokenizer& tokenizer, std::vector<int32_t> ending_ids,
                                     std::vector<std::string> triggers)
    : mask_(std::move(mask)),
      tokenizer_(&tokenizer),
      ending_ids_(std::move(ending_ids)),
      triggers_(std::move(triggers)),
      matcher_(grammar),
      completion_(std::move(grammar)),
      budget_mask_(mask_->trie(), completion_),
      active_(triggers_.empty()) {
  std::sort(ending_ids_.begin(), ending_ids_.end());
  ending_ids_.erase(std::unique(ending_ids_.begin(), ending_ids_.end()), ending_ids_.end());
}

bool GrammarConstraint::is_ending(int32_t token) const {
  return std::binary_search(ending_ids_.begin(), ending_ids_.end(), token);
}

void GrammarConstraint::set_budget(int32_t tokens_left) {
  budget_ = tokens_left;
  update_closing();
}

void GrammarConstraint::update_closing() {
  const bool was_closing = closing_, was_guarding = guarding_;
  closing_ = guarding_ = false;
  if (active_ && !dead_) {
    const std::optional<size_t> rest = completion_.length(matcher_);
    if (rest && *rest > 0 && int64_t(budget_) <= int64_t(*rest)) {
      closing_text_ = *completion_.of(matcher_);
      closing_ = true;
      // Without a token for its first byte the completion cannot be written: constrain as usual.
      const TokenTrie& trie = mask_->trie();
      bool writable = false;
      for (int32_t id = 0; id < trie.vocab_size() && !writable; ++id) writable = spells_closing_prefix(id);
      closing_ = writable;
    }
    // Inside a UTF-8 character no stack is known: judged as if the completion were empty.
    const size_t reach = completion_.longest_stack_length(matcher_).value_or(0);
    guarding_ = !closing_ && budget_ >= 1 && int64_t(budget_) - 1 < int64_t(reach) + kGrowthMargin;
  }
  if (closing_ || was_closing || guarding_ || was_guarding) bits_valid_ = false;
}

bool GrammarConstraint::spells_closing_prefix(int32_t token) const {
  const std::string_view bytes = mask_->trie().token(token);
  return !bytes.empty() && std::string_view(closing_text_).substr(0, bytes.size()) == bytes;
}

bool GrammarConstraint::allows(int32_t token) {
  if (dead_) return false;
  if (is_ending(token)) return matcher_.can_end();
  if (closing_) return spells_closing_prefix(token);
  if (guarding_) return mask_->allows(matcher_, token) && budget_mask_.allows(matcher_, token, size_t(budget_ - 1));
  return mask_->allows(matcher_, token);
}

std::span<const uint64_t> GrammarConstraint::mask() {
  if (!bits_valid_) {
    if (closing_) {
      bits_.assign(mask_->words(), 0);
      for (int32_t id = 0; id < mask_->trie().vocab_size(); ++id) {
        if (spells_closing_prefix(id)) bits_[size_t(id) / 64] |= uint64_t(1) << (id % 64);
      }
    } else if (guarding_) {
      budget_mask_.fill(matcher_, size_t(budget_ - 1), bits_);
    } else {
      mask_->fill_mask(matcher_, bits_);
    }
    if (dead_) std::fill(bits_.begin(), bits_.end(), 0);
    const bool can_end = !dead_ && matcher_.can_end();
    for (int32_t id : ending_ids_) {
      const uint64_t bit = uint64_t(1) << (id % 64);
      if (can_end) {
        bits_[size_t(id) / 64] |= bit;
      } else {
        bits_[size_t(id) / 64] &= ~bit;
      }
    }
    bits_valid_ = true;
  }
  return bits_;
}

void GrammarConstraint::accept(int32_t token) {
  if (dead_ || is_ending(token)) return;
  bits_valid_ = false;
  if (active_) {
    dead_ = !matcher_.accept_utf8(tokenizer_->token_text(token));
    return;
  }
  // A control token (Mistral's [TOOL_CALLS]) reads as its spelling here, so it can trigger.
  const size_t searched_from = untriggered_.size();
  const bool control = tokenizer_->vocab().types[size_t(token)] == TokenType::Control;
  untriggered_ += control ? tokenizer_->vocab().tokens[size_t(token)] : tokenizer_->token_text(token);
  look_for_trigger(searched_from);
}

void GrammarConstraint::look_for_trigger(size_t searched_from) {
  // The earliest occurrence of any trigger that ends in the new text.
  size_t first = std::string::npos;
  for (const std::string& t : triggers_) {
    const size_t from = searched_from >= t.size() ? searched_from - t.size() + 1 : 0;
    first = std::min(first, untriggered_.find(t, from));
  }
  if (first == std::string::npos) return;
  active_ = true;
  dead_ = !matcher_.accept_utf8(std::string_view(untriggered_).substr(first));
  untriggered_.clear();
}

}  // namespace pagoda::grammar
