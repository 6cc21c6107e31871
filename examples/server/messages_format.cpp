#include "examples/server/messages_format.h"

#include <algorithm>
#include <utility>

#include "protocol/anthropic_messages.h"

namespace pagoda::server {

namespace {

class MessagesFormat final : public ApiFormat {
 public:
  MessagesFormat(ResponseHeader header, std::vector<std::string> stop)
      : header_(std::move(header)), stop_(std::move(stop)), events_(header_.id, header_.model) {}

  std::string whole(const std::vector<Choice>& choices, const Usage& usage) override {
    const Choice& c = choices.at(0);
    anthropic::Reply reply = reply_of(c.finish_reason, c.stop_string, usage);
    reply.thinking = c.reasoning;
    reply.text = c.text;
    reply.calls = c.tool_calls;
    std::vector<std::string> ids;
    for (const chat::ParsedToolCall& call : reply.calls) ids.push_back(anthropic::tool_use_id(call));
    return dump_json(anthropic::message_json(header_.id, header_.model, reply, ids));
  }

  std::string stream_start(const Usage& usage) override { return write(events_.start(usage.prompt_tokens)); }

  std::string text_event(int32_t, const std::string& text, bool, const nlohmann::json&) override {
    return write(events_.text(text));
  }

  std::string reply_event(int32_t, const chat::ChatReplySplitter::Delta& delta, bool, const nlohmann::json&) override {
    return write(events_.thinking(delta.reasoning)) + write(events_.text(delta.content));
  }

  std::string choice_end(const ChoiceEnd& end) override {
    std::string out = write(events_.thinking(end.rest.reasoning)) + write(events_.text(end.rest.content));
    anthropic::Reply reply = reply_of(end.finish, end.stop_string, end.usage ? *end.usage : Usage{});
    reply.calls = end.calls;
    return out + write(events_.finish(reply));
  }

  std::string stream_end(const Usage&) override { return {}; }

  std::string error_event(const ApiError& error) override {
    return sse_event(anthropic::error_json(error.status(), error.what()), "error");
  }

 private:
  // The stop reason and usage of a finished reply; a stop string is reported as stop_sequence
  // only when it is one the request gave (not the chat format's own end markers).
  anthropic::Reply reply_of(FinishReason finish, const std::string& stop_string, const Usage& usage) const {
    anthropic::Reply reply;
    reply.finish = finish;
    if (std::find(stop_.begin(), stop_.end(), stop_string) != stop_.end()) reply.stop_sequence = stop_string;
    reply.input_tokens = usage.prompt_tokens;
    reply.output_tokens = usage.completion_tokens;
    return reply;
  }

  static std::string write(const std::vector<anthropic::MessageEvents::Event>& events) {
    std::string out;
    for (const auto& [name, body] : events) out += sse_event(body, name);
    return out;
  }

  ResponseHeader header_;
  std::vector<std::string> stop_;
  anthropic::MessageEvents events_;
};

}  // namespace

std::unique_ptr<ApiFormat> make_messages_format(const ApiRequest& request, const ResponseHeader& header) {
  return std::make_unique<MessagesFormat>(header, request.stop);
}

}  // namespace pagoda::server
