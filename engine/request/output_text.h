#pragma once
// A request's output text as tokens arrive: incremental UTF-8-safe detokenization, stop
// strings, and the hold-back that keeps a stream from showing text a stop string will cut.

#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace pagoda {

class OutputText {
 public:
  OutputText(const Tokenizer& tokenizer, std::vector<std::string> stop_strings);

  // Adds a token's text. Returns the text now safe to show (held-back text comes out later).
  std::string append(int32_t token);

  // True once a stop string has appeared; the text is then cut before it.
  bool stopped() const { return stopped_; }
  // The stop string that appeared (the one starting first), once stopped().
  const std::string& stop_string() const { return stop_string_; }

  // Ends the stream: returns what was held back (for a stream) and fixes the final text.
  std::string finish();

  const std::string& text() const { return text_; }

 private:
  StreamDecoder decoder_;
  std::vector<std::string> stop_strings_;
  size_t longest_stop_ = 0;
  std::string text_;    // all text so far (cut at a stop string once one is found)
  size_t emitted_ = 0;  // bytes of text_ already handed out
  bool stopped_ = false;
  std::string stop_string_;
};

}  // namespace pagoda
