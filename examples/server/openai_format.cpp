// OpenAI's chat completions and completions as an ApiFormat: chat.completion(.chunk) and
// text_completion objects, a stream of `data:` chunks that ends with `data: [DONE]`.

#include "examples/server/openai_format.h"

#include <utility>

namespace pagoda::server {

namespace {

using nlohmann::json;

// A split reply's text and thinking as a chat delta.
json delta_json(const chat::ChatReplySplitter::Delta& d) {
  json delta = json::object();
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
  return delta;
}

class OpenAiFormat final : public ApiFormat {
 public:
  OpenAiFormat(ResponseHeader header, bool include_usage) : header_(std::move(header)), include_usage_(include_usage) {}

  std::string whole(const std::vector<Choice>& choices, const Usage& usage) override {
    return dump_json(completion_json(header_, choices, usage.prompt_tokens, usage.completion_tokens));
  }

  std::string stream_start(const Usage&) override { return {}; }

  std::string text_event(int32_t index, const std::string& text, bool first, const json& logprobs) override {
    return sse_event(chunk_json(header_, index, text, first, std::nullopt, logprobs));
  }

  std::string reply_event(int32_t index, const chat::ChatReplySplitter::Delta& delta, bool first,
                          const json& logprobs) override {
    return sse_event(reply_chunk_json(header_, index, delta_json(delta), first, nullptr, logprobs));
  }

  std::string choice_end(const ChoiceEnd& end) override {
    std::string out;
    json last;
    if (end.split) {
      // What the reply held back to its end: text after a tag that was not a call, the calls.
      json delta = delta_json(end.rest);
      if (!end.calls.empty()) delta["tool_calls"] = tool_calls_json(end.calls, true);
      bool first = end.first;
      if (!delta.empty())
        out += sse_event(reply_chunk_json(header_, end.index, delta, std::exchange(first, false), nullptr));
      const char* reason = end.calls.empty() ? openai_finish_reason(end.finish) : "tool_calls";
      last = reply_chunk_json(header_, end.index, json::object(), first, reason);
    } else {
      last = chunk_json(header_, end.index, "", end.first, end.finish);
    }
    if (end.usage) last["usage"] = usage_json(end.usage->prompt_tokens, end.usage->completion_tokens);
    return out + sse_event(last);
  }

  std::string stream_end(const Usage& usage) override {
    std::string out;
    if (include_usage_) out += sse_event(usage_chunk_json(header_, usage.prompt_tokens, usage.completion_tokens));
    return out + "data: [DONE]\n\n";
  }

  std::string error_event(const ApiError& error) override { return sse_event(error.body()); }

 private:
  ResponseHeader header_;
  bool include_usage_;
};

}  // namespace

std::unique_ptr<ApiFormat> make_openai_format(const ApiRequest& request, const ResponseHeader& header) {
  return std::make_unique<OpenAiFormat>(header, request.include_usage);
}

}  // namespace pagoda::server
