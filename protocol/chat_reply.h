#pragma once
// A chat reply split the way OpenAI-compatible servers return it: the model's thinking
// (`reasoning_content`, for templates with <think> blocks), the text (`content`) and its tool
// calls (`tool_calls`), as the reply streams in. Text is released as soon as it cannot be part
// of a tag still being written (a partial "</think>" or "<tool_call>" is held back), and a tool
// call only once the reply has ended and it parses; so the deltas of a stream add up to exactly
// the unstreamed message, which is computed by the same splitter.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/tool_calls.h"

namespace pagoda::chat {

// What a chat request's reply may hold besides text.
struct ReplyShape {
  bool reasoning = false;            // the template thinks in <think> ... </think>
  bool starts_in_reasoning = false;  // the prompt already opened <think> (DeepSeek-R1's)
  struct Tools {
    ToolCallFormat format = ToolCallFormat::Generic;
    std::vector<ToolDefinition> definitions;
  };
  std::optional<Tools> tools;  // the request offered tools (and tool_choice is not "none")
};

class ChatReplySplitter {
 public:
  explicit ChatReplySplitter(ReplyShape shape);

  struct Delta {
    std::string reasoning;
    std::string content;
    bool empty() const { return reasoning.empty() && content.empty(); }
  };

  // The reply's next text (control tokens spelled out): what can be released of it.
  Delta feed(std::string_view text);
  // The reply has ended: the rest, with the content of any text that was meant as a tool call
  // but does not parse as one. Then calls() holds the calls.
  Delta finish();
  const std::vector<ParsedToolCall>& calls() const { return calls_; }

 private:
  enum class Phase { Start, Reasoning, Content, Calls };

  void advance(Delta& out, bool ended);
  // Releases content up to `end` (exclusive), holding back trailing whitespace unless `ended`.
  void release_content(size_t end, Delta& out, bool ended);

  ReplyShape shape_;
  Phase phase_;
  std::string text_;               // everything fed so far
  size_t done_ = 0;                // text_ before this is released (or belongs to the calls)
  size_t calls_begin_ = 0;         // where the tool calls start, in Phase::Calls
  bool content_started_ = false;   // leading whitespace of the content is dropped
  bool content_released_ = false;  // some content went out
  std::vector<ParsedToolCall> calls_;
};

}  // namespace pagoda::chat
