// The Responses API as an ApiFormat: protocol/responses_api builds the JSON, this file feeds it
// the choice (n is 1) and writes its events as `event:`/`data:` pairs, without `[DONE]`.

#include "examples/server/responses_format.h"

#include <utility>

#include "examples/server/api_error.h"
#include "protocol/responses_api.h"

namespace pagoda::server {

namespace {

std::string sse(const responses::ResponseEventWriter::Events& events) {
  std::string out;
  for (const nlohmann::ordered_json& e : events) out += responses::sse_event(e);
  return out;
}

responses::ResponseUsage usage_of(const Usage& usage) { return {usage.prompt_tokens, usage.completion_tokens}; }

class ResponsesFormat final : public ApiFormat {
 public:
  explicit ResponsesFormat(const responses::ResponseInfo& info) : info_(info), events_(info) {}

  std::string whole(const std::vector<Choice>& choices, const Usage& usage) override {
    const Choice& c = choices.at(0);
    const responses::ResponseOutput output{.reasoning = c.reasoning,
                                           .text = c.text,
                                           .calls = c.tool_calls,
                                           .cut_by_length = c.finish_reason == FinishReason::Length};
    return dump_json(responses::response_json(info_, output, usage_of(usage)));
  }

  std::string stream_start(const Usage&) override { return sse(events_.start()); }

  std::string text_event(int32_t, const std::string& text, bool, const nlohmann::json&) override {
    return sse(events_.text(text));
  }

  std::string reply_event(int32_t, const chat::ChatReplySplitter::Delta& delta, bool, const nlohmann::json&) override {
    return sse(events_.reasoning(delta.reasoning)) + sse(events_.text(delta.content));
  }

  std::string choice_end(const ChoiceEnd& end) override {
    return sse(events_.reasoning(end.rest.reasoning)) + sse(events_.text(end.rest.content)) +
           sse(events_.end(end.calls, end.finish == FinishReason::Length));
  }

  std::string stream_end(const Usage& usage) override { return sse(events_.finish(usage_of(usage))); }

  std::string error_event(const ApiError& error) override {
    const nlohmann::json e = error.body()["error"];
    const std::string code = e["code"].is_string() ? e["code"].get<std::string>() : e["type"].get<std::string>();
    return sse(events_.fail(code, error.what()));
  }

 private:
  responses::ResponseInfo info_;
  responses::ResponseEventWriter events_;
};

}  // namespace

std::unique_ptr<ApiFormat> make_responses_format(const ApiRequest& request, const ResponseHeader& header) {
  // A random id rather than the header's serial one: clients keep ids (and the call ids made
  // from it) across server restarts.
  return std::make_unique<ResponsesFormat>(
      responses::ResponseInfo{responses::new_response_id(), header.created, header.model, request.answer_settings});
}

}  // namespace pagoda::server
