#include "protocol/chat_reply.h"

#include <algorithm>

namespace pagoda::chat {

namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The longest end of `text` that is a proper beginning of `tag`: a tag that may still be
// being written.
size_t partial_tag(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

}  // namespace

ChatReplySplitter::ChatReplySplitter(ReplyShape shape)
    : shape_(std::move(shape)),
      phase_(shape_.starts_in_reasoning ? Phase::Reasoning
             : shape_.reasoning         ? Phase::Start
                                        : Phase::Content) {}

ChatReplySplitter::Delta ChatReplySplitter::feed(std::string_view text) {
  text_ += text;
  Delta out;
  advance(out, false);
  return out;
}

ChatReplySplitter::Delta ChatReplySplitter::finish() {
  Delta out;
  advance(out, true);
  return out;
}

void ChatReplySplitter::release_content(size_t end, Delta& out, bool ended) {
  // Whitespace before a tool call or at the very end is not content; elsewhere it goes out
  // with the text after it.
  size_t last = end;
  while (last > done_ && is_space(text_[last - 1])) --last;
  if (last > done_) {
    out.content.append(text_, done_, last - done_);
    content_released_ = true;
    done_ = last;
  }
  if (ended) done_ = end;
}

void ChatReplySplitter::advance(Delta& out, bool ended) {
  for (;;) {
    const std::string_view rest = std::string_view(text_).substr(done_);
    switch (phase_) {
      case Phase::Start: {  // the reply may open with <think>
        const size_t lead = rest.find_first_not_of(" \n\r\t");
        const std::string_view head = lead == std::string_view::npos ? std::string_view() : rest.substr(lead);
        if (starts_with(head, kThinkOpen)) {
          done_ += lead + kThinkOpen.size();
          phase_ = Phase::Reasoning;
          continue;
        }
        if (!ended && starts_with(kThinkOpen, head)) return;
        phase_ = Phase::Content;
        continue;
      }
      case Phase::Reasoning: {
        const size_t close = rest.find(kThinkClose);
        if (close != std::string_view::npos) {
          out.reasoning.append(rest.substr(0, close));
          done_ += close + kThinkClose.size();
          phase_ = Phase::Content;
          continue;
        }
        const size_t keep = ended ? 0 : partial_tag(rest, kThinkClose);
        out.reasoning.append(rest.substr(0, rest.size() - keep));
        done_ += rest.size() - keep;
        return;
      }
      case Phase::Content: {
        if (!content_started_) {
          const size_t lead = rest.find_first_not_of(" \n\r\t");
          if (lead == std::string_view::npos) {
            if (ended) done_ = text_.size();
            return;
          }
          done_ += lead;
          content_started_ = true;
          continue;
        }
        if (shape_.tools) {
          const ToolCallFormat format = shape_.tools->format;
          const std::string_view tag = tool_call_tag(format);
          if (format == ToolCallFormat::Llama3 || format == ToolCallFormat::Generic) {
            // A call is the whole reply: a JSON object, for Llama maybe after <|python_tag|>.
            if (!content_released_) {
              if (starts_with(rest, "{") || (!tag.empty() && starts_with(rest, tag))) {
                calls_begin_ = done_;
                phase_ = Phase::Calls;
                continue;
              }
              if (!ended && !tag.empty() && starts_with(tag, rest)) return;
            }
          } else {
            // Mistral's tag is a control token a whole-reply grammar leaves out: a reply that
            // opens with the call list is calls too.
            if (format == ToolCallFormat::Mistral && !content_released_ && starts_with(rest, "[")) {
              calls_begin_ = done_;
              phase_ = Phase::Calls;
              continue;
            }
            const size_t at = rest.find(tag);
            if (at != std::string_view::npos) {
              const size_t tag_at = done_ + at;
              release_content(tag_at, out, false);
              calls_begin_ = tag_at;
              phase_ = Phase::Calls;
              continue;
            }
            release_content(text_.size() - (ended ? 0 : partial_tag(rest, tag)), out, ended);
            return;
          }
        }
        release_content(text_.size(), out, ended);
        return;
      }
      case Phase::Calls: {
        if (!ended) return;
        const ParsedReply parsed = parse_tool_calls(shape_.tools->format, std::string_view(text_).substr(calls_begin_),
                                                    shape_.tools->definitions);
        calls_ = parsed.calls;
        if (!parsed.content.empty()) {
          if (content_released_) out.content += '\n';
          out.content += parsed.content;
          content_released_ = true;
        }
        done_ = text_.size();
        return;
      }
    }
  }
}

}  // namespace pagoda::chat
