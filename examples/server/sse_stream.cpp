#include "examples/server/sse_stream.h"

#include <string>
#include <utility>

#include "examples/server/api_error.h"
#include "examples/server/openai_logprobs.h"

namespace pagoda::server {

namespace {

using Clock = std::chrono::steady_clock;

std::string event(const nlohmann::json& body) { return "data: " + dump_json(body) + "\n\n"; }

// One stream's state, shared by httplib's content provider and its releaser.
struct EventStream {
  RequestHandle handle;
  ResponseHeader header;
  Request request;  // its logprobs and ending tokens
  std::string echo;  // the prompt, to send first (completions' echo)
  const Engine& engine;
  bool include_usage;
  ServerMetrics& metrics;
  Clock::time_point start = Clock::now();
  bool first = true;
  size_t text_offset = 0;  // completions' logprobs.text_offset of the next token
  bool finished = false;  // the last event was written

  // The events that end the stream, from the completion.
  std::string ending() {
    const Completion c = handle.get();
    if (c.finish_reason == FinishReason::Cancelled) {
      metrics.count_request(Outcome::Cancelled);
      return event(ApiError(503, "the request was cancelled: the server is shutting down", "server_error").body());
    }
    if (c.finish_reason == FinishReason::Error) {
      metrics.count_request(Outcome::ServerError);
      return event(ApiError(500, c.error, "server_error").body());
    }
    metrics.count_request(c.finish_reason == FinishReason::Length ? Outcome::Length : Outcome::Stop);
    metrics.record(c, std::chrono::duration<double>(Clock::now() - start).count());
    nlohmann::json last = chunk_json(header, "", first, c.finish_reason);
    last["usage"] = usage_json(c.prompt_tokens, int64_t(c.token_ids.size()));
    std::string out = event(last);
    if (include_usage) out += event(usage_chunk_json(header, c));
    return out + "data: [DONE]\n\n";
  }
};

}  // namespace

void stream_events(httplib::Response& res, RequestHandle handle, const ApiRequest& request, ResponseHeader header,
                   ServerMetrics& metrics, const Engine& engine) {
  auto stream = std::make_shared<EventStream>(
      EventStream{std::move(handle), std::move(header), request.request, request.echo ? request.prompt_text : "", engine,
                  request.include_usage, metrics});
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [stream](size_t, httplib::DataSink& sink) {
        EventStream& s = *stream;
        if (!s.echo.empty()) {
          const std::string chunk = event(chunk_json(s.header, std::exchange(s.echo, {}), true, std::nullopt));
          s.first = false;
          return sink.write(chunk.data(), chunk.size());
        }
        // Short waits, so a client that left is noticed even while no token comes.
        if (auto token = s.handle.next_token(std::chrono::milliseconds(100))) {
          nlohmann::json logprobs = nullptr;
          if (token->logprobs && !is_ending_token(s.engine, s.request, token->token)) {
            const int32_t id = token->token;
            logprobs = logprobs_json(s.header.endpoint, s.engine, std::span(&id, 1), std::span(&*token->logprobs, 1),
                                     s.text_offset);
            s.text_offset += s.engine.token_text(id).size();
          }
          if (token->text.empty() && logprobs.is_null()) return true;
          const std::string chunk = event(chunk_json(s.header, token->text, s.first, std::nullopt, logprobs));
          s.first = false;
          return sink.write(chunk.data(), chunk.size());
        }
        if (!s.handle.stream_ended()) return sink.is_writable();
        const std::string last = s.ending();
        s.finished = true;
        if (!sink.write(last.data(), last.size())) return false;
        sink.done();
        return true;
      },
      [stream](bool success) {
        // The client went away (or the server is stopping) before the end: stop the request.
        if (!stream->finished) {
          stream->handle.cancel();
          stream->metrics.count_request(Outcome::Cancelled);
        }
      });
}

}  // namespace pagoda::server
