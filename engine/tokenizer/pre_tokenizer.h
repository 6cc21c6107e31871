#pragma once
// The pre-tokenizer of a byte-level BPE vocabulary: the regular expressions llama.cpp applies
// for the vocabulary's tokenizer.ggml.pre (llama-vocab.cpp), before BPE merges within each
// piece. Compiled with PCRE2 (UTF, Unicode properties, JIT).
//
// As in llama.cpp (unicode_regex_split), the expressions apply one after another: each one
// splits every piece the previous ones left, and both its matches and the text between them
// become pieces. Each piece is matched as a whole subject, so `$` and `(?!\S)` see its end.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda {

class PreTokenizer {
 public:
  // The expressions for `name` ("default", "gpt-2", "llama-bpe", "qwen2", ...). An empty
  // name is llama.cpp's "default". Throws pagoda::Error naming an unknown one.
  explicit PreTokenizer(const std::string& name);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  const std::string& name() const { return name_; }
  // Llama 3's rule: a piece that is a whole token is that token, without merges.
  bool ignore_merges() const { return ignore_merges_; }

  // Appends the pieces of `text` (well-formed UTF-8, see well_formed_utf8) to `pieces`, as
  // views into `text`, in order; together they cover it exactly.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;

  // Every name this pre-tokenizer knows.
  static std::vector<std::string> known_names();
  // Whether llama.cpp adds BOS for this pre-tokenizer when the file does not say (Llama 3's
  // and Tekken's: yes; the others: no).
  static bool adds_bos_by_default(const std::string& name);

 private:
  struct Regex;
  std::string name_;
  bool ignore_merges_ = false;
  std::vector<std::unique_ptr<Regex>> regexes_;
};

// `text` with what llama.cpp's UTF-8 decoder refuses replaced as it does: a byte that starts
// no well-formed sequence becomes U+FFFD, an overlong sequence its character. (A surrogate or
// a character past U+10FFFF, which llama.cpp cannot encode back, becomes U+FFFD.)
std::string well_formed_utf8(std::string_view text);

}  // namespace pagoda
