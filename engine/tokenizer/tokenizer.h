#pragma once
// The tokenizer of a model's vocabulary and its incremental detokenizer: SentencePiece-style
// BPE, as llama.cpp's `llama` (SPM) vocabulary and llama2.c's run.c do it, byte-level BPE
// (llama.cpp's `gpt2`, see BpeTokenizer) or WordPiece (llama.cpp's `bert`, see WpmTokenizer).
// Special tokens written in the text are cut out first (SpecialTokenSplitter).
//
// SPM encoding: the text (with a space in front when add_space_prefix and the text is non-empty)
// is split into UTF-8 characters; then the adjacent pair whose concatenation is a vocabulary
// piece with the highest score is merged (ties: leftmost), again and again, until no pair
// merges. A character that ends up as no piece becomes its bytes' `<0xXX>` tokens (byte
// fallback). This is O(n log n): a priority queue of candidate merges, invalidated lazily.
//
// Spaces: GGUF (llama.cpp) vocabularies spell a space as "▁" (U+2581), llama2.c's
// tokenizer.bin as a plain ' '. The tokenizer finds out which (SpaceMarker) and works in that
// spelling; callers only ever see plain spaces in text.
//
// Decoding: `<0xXX>` tokens give the raw byte, "▁" gives a space (SPM, WPM), a byte-level BPE
// token the bytes its characters stand for (byte_unicode.h), control/unknown/unused
// tokens give nothing, user-defined tokens give their text verbatim. The decoder emits only
// complete UTF-8; ill-formed bytes become U+FFFD (one per maximal ill-formed subpart).

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/piece_map.h"
#include "engine/tokenizer/special_tokens.h"
#include "engine/tokenizer/wpm_tokenizer.h"

namespace pagoda {

class GgufFile;

// llama.cpp's token_type values (GGUF tokenizer.ggml.token_type).
enum class TokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

// The vocabulary's algorithm (GGUF tokenizer.ggml.model).
enum class TokenizerModel : int32_t {
  Spm = 0,  // "llama": SentencePiece BPE by piece scores, byte fallback
  Bpe = 1,  // "gpt2": byte-level BPE by merge ranks after a regex pre-tokenizer (BpeTokenizer)
  Wpm = 2,  // "bert": WordPiece, longest match first after BERT's normalization (WpmTokenizer)
};

// How the vocabulary's pieces spell a space.
enum class SpaceMarker : int32_t {
  Auto = 0,     // decide from the pieces: "▁" if more pieces contain U+2581 than ' '
  Space = 1,    // a plain ' ' (llama2.c tokenizer.bin)
  Escaped = 2,  // "▁" U+2581 (SentencePiece, GGUF)
};

struct TokenizerVocab {
  TokenizerModel model = TokenizerModel::Spm;
  std::string pre;                  // Bpe: tokenizer.ggml.pre ("llama-bpe", "qwen2", ...)
  std::vector<std::string> merges;  // Bpe: tokenizer.ggml.merges, "left right", best first
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<TokenType> types;
  int32_t bos_id = 1, eos_id = 2, unk_id = 0;  // Bpe: unk_id may be -1 (none); Wpm: bos is [CLS]
  int32_t sep_id = -1;                         // Wpm: [SEP], which ends an encoding with add_bos
  // End of turn / of message (tokenizer.ggml.eot_token_id, eom_token_id) and the fill-in-the-
  // middle pad, repository and file-separator tokens; -1 when the vocabulary names none.
  int32_t eot_id = -1, eom_id = -1, fim_pad_id = -1, fim_rep_id = -1, fim_sep_id = -1;
  bool add_bos = true, add_space_prefix = true;
  // tokenizer.ggml.add_eos_token: an embedding input ends with EOS (Qwen3-Embedding pools it).
  bool add_eos = false;
  SpaceMarker space_marker = SpaceMarker::Auto;  // resolved (never Auto) in Tokenizer::vocab()
  // GGUF general.name and general.architecture: llama.cpp makes some special tokens eat the
  // whitespace around them by these names (phi-3's, see SpecialTokenSplitter).
  std::string model_name, architecture;
};

class Tokenizer {
 public:
  // Validates: non-empty, tokens/scores/types of equal size, ids in range, known token
  // types, byte tokens spelled <0xXX>, no NaN score. Throws pagoda::Error. Then retypes the
  // tokens llama.cpp treats as control by their text (apply_special_token_overrides).
  explicit Tokenizer(TokenizerVocab vocab);

  // llama2.c tokenizer.bin: int32 max_token_length, then per token f32 score, int32 length,
  // bytes. Exactly `vocab_size` tokens must be there and nothing after them. Types: "<unk>"
  // Unknown; ids 1, 2 (and "<s>", "</s>") Control; "<0xXX>" Byte; else Normal. bos 1, eos 2,
  // unk 0, spaces as ' '. Malformed or truncated file → pagoda::Error naming the path.
  static Tokenizer from_llama2c(const std::string& path, int32_t vocab_size);

  // GGUF tokenizer.ggml.*: model "llama" (SPM) or "gpt2" (byte-level BPE); tokens; scores
  // (optional → 0); token_type (optional → Normal); eot/eom/fim_*_token_id (optional).
  // SPM: bos/eos/unknown_token_id (optional → 1/2/0, llama.cpp's defaults); add_bos_token,
  // add_space_prefix (optional → true); spaces as "▁". Every model: add_eos_token (optional → false).
  // BPE: pre (optional → "default"); merges (required); bos/eos_token_id (optional → 11, as
  // llama.cpp), unknown_token_id (optional → none); add_bos_token (optional → llama.cpp's
  // default for the pre-tokenizer); no space prefix.
  // WPM ("bert"): bos_token_id, else cls_token_id (optional → 101, llama.cpp's default);
  // seperator_token_id, spelled as llama.cpp spells it (optional → 102); unknown_token_id
  // (optional → 100); eos_token_id (optional → the separator); add_bos_token (optional → true);
  // no space prefix.
  // Anything missing or inconsistent → pagoda::Error naming the file and the key.
  static Tokenizer from_gguf(const GgufFile& gguf);

  // Token ids for `text` (BOS first when add_bos). Empty text gives [BOS] or [] (no prefix).
  // WPM: add_bos is llama.cpp's add_special, [CLS] first and [SEP] last ("" gives both).
  // Special tokens written in the text are first cut out as llama.cpp does (see
  // SpecialTokenSplitter): user-defined tokens always, control tokens ("<|im_start|>", "<s>")
  // only with parse_special — without it their text is tokenized as ordinary text. An SPM
  // vocabulary puts its space prefix before every text fragment that follows a special token.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = false) const;
  // A chat prompt: control tokens are parsed only outside `data` (see SpecialTokenSplitter),
  // the data ranges being plain text; with no control-token text in the data, the same ids as
  // encode(text, add_bos, true).
  std::vector<int32_t> encode(std::string_view text, bool add_bos, std::span<const TextSpan> data) const;

  // The raw bytes token `id` decodes to (no leading-space stripping). Error if out of range.
  std::string token_text(int32_t id) const;

  // Whole-sequence decode, the same rules as StreamDecoder (with its default options):
  // the concatenation of feed() for every id, then flush().
  std::string decode(std::span<const int32_t> ids) const;
  std::string decode(std::span<const int32_t> ids, bool strip_leading_space) const;

  int32_t vocab_size() const { return int32_t(vocab_.tokens.size()); }
  int32_t bos_id() const { return vocab_.bos_id; }
  int32_t eos_id() const { return vocab_.eos_id; }
  int32_t unk_id() const { return vocab_.unk_id; }
  int32_t sep_id() const { return vocab_.sep_id; }  // Wpm's [SEP]; -1 for the others
  // The tokens that end generation (see end_of_generation_ids), sorted.
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }
  bool is_eog(int32_t id) const { return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id); }
  bool add_bos() const { return vocab_.add_bos; }
  bool add_eos() const { return vocab_.add_eos; }
  bool add_space_prefix() const { return vocab_.add_space_prefix; }
  TokenizerModel model() const { return vocab_.model; }
  const TokenizerVocab& vocab() const { return vocab_; }

  // The id of the piece spelled exactly `piece` (in the vocabulary's own spelling, so "▁a" in
  // a GGUF vocabulary), or -1.
  int32_t find_piece(std::string_view piece) const;

 private:
  friend class StreamDecoder;

  std::vector<int32_t> encode_fragments(const std::vector<Fragment>& fragments, bool add_bos) const;
  void encode_spm(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const;

  TokenizerVocab vocab_;
  SpecialTokenSplitter special_;
  std::vector<int32_t> eog_ids_;
  std::shared_ptr<const BpeTokenizer> bpe_;  // Bpe vocabularies only; shared by copies
  std::shared_ptr<const WpmTokenizer> wpm_;  // Wpm vocabularies only
  PieceMap piece_to_id_;                     // the vocabulary's spelling → id (a duplicate: the last)
  std::vector<std::string> output_;          // what each token decodes to
  std::array<int32_t, 256> byte_ids_{};      // the <0xXX> token of each byte, or unk
  std::string space_;                        // " " or "▁"
};

// Per-request incremental detokenizer. Keeps a reference to the Tokenizer, which must outlive
// it. Not thread-safe (one per stream).
//
// Leading space: encode() puts a space before the text (the "dummy prefix"); with
// strip_leading_space the decoder removes one leading space from the first text after the
// start of the stream and after each BOS, as llama2.c's run.c does after BOS ("Once upon",
// not " Once upon"). llama.cpp's llama_detokenize strips the first token's leading space when
// add_space_prefix too, but lets a BOS at the front use up that rule (so [BOS, " Once"] gives
// " Once" there); pagoda follows run.c, whose printed text is the golden reference.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok);  // strip_leading_space = tok.add_space_prefix()
  StreamDecoder(const Tokenizer& tok, bool strip_leading_space);

  // Newly completed UTF-8 text (may be empty): an incomplete multi-byte character at the end
  // is held back until its remaining bytes arrive. Error if `id` is out of range.
  std::string feed(int32_t id);
  // Whatever is left: an incomplete tail becomes U+FFFD. The decoder can go on afterwards.
  std::string flush();

 private:
  std::string drain(bool final);

  const Tokenizer* tok_;
  bool strip_;
  bool strip_pending_;
  std::string pending_;  // bytes not yet emitted (an incomplete UTF-8 sequence)
};

}  // namespace pagoda
