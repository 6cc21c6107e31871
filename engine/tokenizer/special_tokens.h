#pragma once
// Special tokens, as llama.cpp treats them: which tokens end generation, which tokens
// "look like" control tokens whatever the file says, and cutting control / user-defined
// token texts out of a prompt before the text is tokenized.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pagoda/chat.h"

namespace pagoda {

struct TokenizerVocab;

// Marks as Control the tokens llama.cpp overrides by their text (end-of-turn, fill-in-the-
// middle and end-of-generation tokens such as "<|eot_id|>", "<|im_end|>", "<|fim_pad|>"), and
// as UserDefined the gpt-oss tokens it always renders ("<|channel|>", ...).
void apply_special_token_overrides(TokenizerVocab& vocab);

// The end-of-generation set, sorted: EOS, the EOT and EOM ids the vocabulary names, the
// fill-in-the-middle pad/repo/separator tokens, and every token whose text llama.cpp treats
// as ending a turn ("<|eot_id|>", "<|im_end|>", "<|end|>", "<|endoftext|>", "<|eom_id|>",
// "<end_of_turn>", ...), with llama.cpp's two exceptions (gpt-oss's "<|end|>", gemma4's "</s>").
std::vector<int32_t> end_of_generation_ids(const TokenizerVocab& vocab);

// A piece of a prompt: either a special token matched whole or text to tokenize.
struct Fragment {
  int32_t token = -1;     // >= 0: this special token
  std::string_view text;  // otherwise: this text (never empty)
};

// Splits text at the special tokens written in it, as llama.cpp's tokenizer_st_partition:
// the candidate tokens, longest text first, each cut every occurrence out of the text left
// by the ones before. Control and Unknown tokens take part only with parse_special;
// UserDefined tokens always do (as Hugging Face and llama.cpp match added tokens whole).
// Some tokens also drop the ASCII whitespace next to them in their fragment, which llama.cpp
// decides by name, not from the file (its LSTRIP/RSTRIP attributes): a model named "phi-3" or
// "phi3" (any case) — every candidate but <unk>, <s> and <|endoftext|> drops the whitespace
// after it; jina-v2 pre-tokenizers and the nomic-bert-moe / jina-bert-v3 architectures —
// <mask> drops the whitespace before it; a model named "modern-bert" — [MASK] does.
class SpecialTokenSplitter {
 public:
  SpecialTokenSplitter() = default;
  explicit SpecialTokenSplitter(const TokenizerVocab& vocab);

  // The fragments of `text`, in order; the texts are views into `text`. With parse_special,
  // a control or unknown token is cut out only where its whole text lies outside `data` (the
  // sorted, disjoint byte ranges of a chat prompt copied from messages): there it stays text.
  // User-defined tokens are cut out anywhere, as without data. The text is split at nothing
  // else, so text without control-token spellings in its data splits as without `data`.
  std::vector<Fragment> split(std::string_view text, bool parse_special, std::span<const TextSpan> data = {}) const;

 private:
  struct Candidate {
    int32_t id;
    std::string text;
    bool user_defined;
    bool lstrip = false, rstrip = false;  // drop the whitespace before / after it
  };
  std::vector<Candidate> candidates_;  // longest first, then by id
  bool any_user_defined_ = false;
};

}  // namespace pagoda
