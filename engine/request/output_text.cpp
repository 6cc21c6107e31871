#include "engine/request/output_text.h"

#include <algorithm>

namespace pagoda {

namespace {

// Bytes at the end of `text` that could begin a UTF-8 character: never split one when
// holding text back.
size_t utf8_boundary_at_or_before(const std::string& text, size_t pos) {
  while (pos > 0 && pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

}  // namespace

OutputText::OutputText(const Tokenizer& tokenizer, std::vector<std::string> stop_strings)
    // Generated text continues the prompt, so its first space is real: no leading-space strip.
    : decoder_(tokenizer, false), stop_strings_(std::move(stop_strings)) {
  std::erase(stop_strings_, std::string());
  for (const auto& s : stop_strings_) longest_stop_ = std::max(longest_stop_, s.size());
}

std::string OutputText::append(int32_t token) {
  if (stopped_) return {};
  const size_t before = text_.size();
  text_ += decoder_.feed(token);
  if (!stop_strings_.empty()) {
    // A stop string can only newly appear in the part that overlaps the new text.
    const size_t from = before >= longest_stop_ ? before - longest_stop_ + 1 : 0;
    size_t cut = std::string::npos;
    for (const auto& s : stop_strings_) {
      const size_t at = text_.find(s, from);
      if (at < cut) {
        cut = at;
        stop_string_ = s;
      }
    }
    if (cut != std::string::npos) {
      text_.resize(cut);
      stopped_ = true;
    }
  }
  size_t safe = text_.size();
  if (!stopped_ && longest_stop_ > 0) {
    safe = text_.size() >= longest_stop_ - 1 ? text_.size() - (longest_stop_ - 1) : 0;
    safe = utf8_boundary_at_or_before(text_, safe);
  }
  if (safe <= emitted_) return {};
  std::string out = text_.substr(emitted_, safe - emitted_);
  emitted_ = safe;
  return out;
}

std::string OutputText::finish() {
  if (!stopped_) text_ += decoder_.flush();
  std::string out = emitted_ < text_.size() ? text_.substr(emitted_) : std::string();
  emitted_ = text_.size();
  return out;
}

}  // namespace pagoda
