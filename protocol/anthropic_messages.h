#pragma once
// Anthropic's Messages API (POST /v1/messages), both ways, as the clients written for it (the
// `@anthropic-ai/sdk` and `anthropic` packages, Claude-style coding agents) send and read it:
//   - a request body becomes an OpenAI chat-completions body, which the server then parses with
//     the one request parser every API shares: `system` → a system message; content blocks
//     `text`, `tool_use` (→ an assistant's tool_calls), `tool_result` (→ tool messages) and
//     `thinking` (→ reasoning_content); `tools` with `input_schema`; `tool_choice` auto / any /
//     tool / none; `stop_sequences`, `max_tokens`, `temperature`, `top_p`, `top_k`, `thinking`;
//   - a finished reply becomes a `message` (thinking, text and tool_use blocks, stop_reason
//     end_turn / max_tokens / stop_sequence / tool_use), and a streamed one its events:
//     message_start, content_block_start / delta / stop per block, message_delta, message_stop.
//
// Malformed fields are pagoda::Error naming the field ('messages[1].content[0].tool_use_id');
// the server answers them with 400 in Anthropic's error shape (error_json).

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pagoda/request.h"
#include "protocol/tool_calls.h"

namespace pagoda::anthropic {

// The Messages body `body` as a chat-completions body. Messages requires `max_tokens` (an
// integer of at least 1, written at most INT32_MAX); count_tokens (`for_count`) does not read it.
nlohmann::ordered_json to_chat_body(const nlohmann::ordered_json& body, bool for_count = false);

// A finished reply as the Messages API reports it.
struct Reply {
  std::string thinking;
  std::string text;
  std::vector<chat::ParsedToolCall> calls;
  FinishReason finish = FinishReason::Eos;
  std::string stop_sequence;  // the request's stop sequence that ended the reply, or ""
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
};

// "end_turn", "max_tokens", "stop_sequence" or "tool_use".
const char* stop_reason(const Reply& reply);

// "toolu_" and 24 random letters and digits, unless the model wrote the call's id itself.
std::string tool_use_id(const chat::ParsedToolCall& call);

// The whole `message` of a non-streamed answer; `ids` are the tool_use ids, one per call.
nlohmann::ordered_json message_json(const std::string& id, const std::string& model, const Reply& reply,
                                    const std::vector<std::string>& ids);

// The events of a streamed answer, each an event name and its JSON. Thinking and text arrive in
// pieces; tool calls only once the reply has ended (a call is known whole only then), each as a
// tool_use block whose input comes in one input_json_delta.
class MessageEvents {
 public:
  using Event = std::pair<std::string, nlohmann::ordered_json>;

  MessageEvents(std::string id, std::string model) : id_(std::move(id)), model_(std::move(model)) {}

  std::vector<Event> start(int64_t input_tokens);
  std::vector<Event> thinking(std::string_view piece);
  std::vector<Event> text(std::string_view piece);
  // The reply's end: its thinking and text were sent as pieces; its calls, stop reason and usage
  // are sent now, then message_stop.
  std::vector<Event> finish(const Reply& reply);

 private:
  enum class Block { None, Thinking, Text };
  // Opens a block of `kind` (closing the one open) unless it is the one open.
  void open(Block kind, std::vector<Event>& out);
  void close(std::vector<Event>& out);

  std::string id_;
  std::string model_;
  Block open_ = Block::None;
  int index_ = -1;  // the open (or last) block's index
};

// Anthropic's error body for an HTTP status: {"type": "error", "error": {"type", "message"}}.
nlohmann::ordered_json error_json(int status, std::string_view message);

}  // namespace pagoda::anthropic
