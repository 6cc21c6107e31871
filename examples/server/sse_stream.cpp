#include "examples/server/sse_stream.h"

#include <optional>
#include <string>
#include <utility>

#include "examples/server/api_error.h"
#include "examples/server/openai_logprobs.h"
#include "examples/server/reply_text.h"

namespace pagoda::server {

namespace {

using Clock = std::chrono::steady_clock;

std::string event(const nlohmann::json& body) { return "data: " + dump_json(body) + "\n\n"; }

// One choice's place in the stream.
struct ChoiceStream {
  RequestHandle handle;
  std::string echo;                                 // the prompt, to send first (completions' echo)
  bool first = true;                                // its next chunk is its first
  size_t text_offset = 0;                           // completions' logprobs.text_offset of its next token
  std::optional<chat::ChatReplySplitter> splitter;  // a chat reply with thinking or tool calls
};

// A split reply's text and thinking as a chat delta.
nlohmann::json delta_json(const chat::ChatReplySplitter::Delta& d) {
  nlohmann::json delta = nlohmann::json::object();
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
  return delta;
}

// One stream's state, run by the worker that writes it.
struct EventStream {
  std::vector<ChoiceStream> choices;
  ResponseHeader header;
  Request request;  // its logprobs and ending tokens
  const Engine& engine;
  bool include_usage;
  ServerMetrics& metrics;
  Clock::time_point start = Clock::now();
  size_t turn = 0;                      // the choice looked at first next time, so none is starved
  std::optional<ReplyText> reply_text;  // with the choices' splitters

  // The next event of any choice: its echo, or a token's chunk; empty when nothing came. With
  // `wait`, the first choice still streaming is waited on a little (one choice: 100 ms, as a
  // client that left must still be noticed; several: 10 ms, so the others are not held up).
  std::string next_event(bool wait) {
    for (size_t k = 0; k < choices.size(); ++k) {
      const size_t i = (turn + k) % choices.size();
      ChoiceStream& c = choices[i];
      if (!c.echo.empty()) {
        turn = i + 1;
        c.first = false;
        return event(chunk_json(header, int32_t(i), std::exchange(c.echo, {}), true, std::nullopt));
      }
      std::chrono::milliseconds timeout(0);
      if (wait && !c.handle.stream_ended()) {
        timeout = std::chrono::milliseconds(choices.size() == 1 ? 100 : 10);
        wait = false;
      }
      while (auto token = c.handle.next_token(timeout)) {
        nlohmann::json logprobs = nullptr;
        if (token->logprobs && !is_ending_token(engine, request, token->token)) {
          const int32_t id = token->token;
          logprobs =
              logprobs_json(header.endpoint, engine, std::span(&id, 1), std::span(&*token->logprobs, 1), c.text_offset);
          c.text_offset += engine.token_text(id).size();
        }
        if (c.splitter) {
          const chat::ChatReplySplitter::Delta d = c.splitter->feed(reply_text->piece(*token));
          if (d.empty() && logprobs.is_null()) continue;
          turn = i + 1;
          const bool first = std::exchange(c.first, false);
          return event(reply_chunk_json(header, int32_t(i), delta_json(d), first, nullptr, logprobs));
        }
        if (token->text.empty() && logprobs.is_null()) continue;
        turn = i + 1;
        const bool first = std::exchange(c.first, false);
        return event(chunk_json(header, int32_t(i), token->text, first, std::nullopt, logprobs));
      }
    }
    return {};
  }

  bool ended() const {
    for (const ChoiceStream& c : choices) {
      if (!c.echo.empty() || !c.handle.stream_ended()) return false;
    }
    return true;
  }

  // The events that end the stream, from the completions: each choice's finish reason, the
  // usage of them all on the last, an optional usage-only chunk, [DONE]. Choices the server
  // cancelled (its shutdown) end as "length": cut short, not finished.
  std::string ending() {
    std::vector<Completion> done;
    for (ChoiceStream& c : choices) done.push_back(c.handle.get());
    int64_t completion_tokens = 0;
    bool cancelled = false;
    for (Completion& c : done) {
      if (c.finish_reason == FinishReason::Error) {
        metrics.count_request(Outcome::ServerError);
        return event(ApiError(500, c.error, "server_error").body());
      }
      if (c.finish_reason == FinishReason::Cancelled) {
        cancelled = true;
        c.finish_reason = FinishReason::Length;
      } else {
        metrics.record(c, std::chrono::duration<double>(Clock::now() - start).count());
      }
      completion_tokens += int64_t(c.token_ids.size());
    }
    metrics.count_request(cancelled                                       ? Outcome::Cancelled
                          : done[0].finish_reason == FinishReason::Length ? Outcome::Length
                                                                          : Outcome::Stop);
    std::string out;
    for (size_t i = 0; i < done.size(); ++i) {
      ChoiceStream& c = choices[i];
      nlohmann::json last;
      if (c.splitter) {
        // What the reply held back to its end: text after a tag that was not a call, the calls.
        nlohmann::json delta = delta_json(c.splitter->finish());
        const std::vector<chat::ParsedToolCall>& calls = c.splitter->calls();
        if (!calls.empty()) delta["tool_calls"] = tool_calls_json(calls, true);
        if (!delta.empty())
          out += event(reply_chunk_json(header, int32_t(i), delta, std::exchange(c.first, false), nullptr));
        const char* reason = calls.empty() ? openai_finish_reason(done[i].finish_reason) : "tool_calls";
        last = reply_chunk_json(header, int32_t(i), nlohmann::json::object(), c.first, reason);
      } else {
        last = chunk_json(header, int32_t(i), "", c.first, done[i].finish_reason);
      }
      if (i + 1 == done.size()) last["usage"] = usage_json(done[0].prompt_tokens, completion_tokens);
      out += event(last);
    }
    if (include_usage) out += event(usage_chunk_json(header, done[0].prompt_tokens, completion_tokens));
    return out + "data: [DONE]\n\n";
  }

  // Writes events as the choices make them until the last; a client that leaves (or stops
  // reading past the write deadline) cancels the requests instead.
  void run(ResponseStream& out) {
    for (;;) {
      std::string chunk = next_event(false);
      if (chunk.empty() && !out.client_gone()) chunk = next_event(true);
      if (out.client_gone()) break;
      if (!chunk.empty()) {
        if (!out.write(chunk)) break;
        continue;
      }
      if (!ended()) continue;
      out.write(ending());
      return;
    }
    for (ChoiceStream& c : choices) c.handle.cancel();
    metrics.count_request(Outcome::Cancelled);
  }
};

}  // namespace

HttpResponse stream_events(std::vector<RequestHandle> handles, const ApiRequest& request, ResponseHeader header,
                           ServerMetrics& metrics, const Engine& engine) {
  auto stream = std::make_shared<EventStream>(
      EventStream{{}, std::move(header), request.request, engine, request.include_usage, metrics});
  for (RequestHandle& h : handles) stream->choices.push_back({std::move(h), request.echo ? request.prompt_text : ""});
  if (request.reply) {
    stream->reply_text.emplace(engine, request.request);
    for (ChoiceStream& c : stream->choices) c.splitter.emplace(*request.reply);
  }
  HttpResponse res;
  res.content_type = "text/event-stream";
  res.headers = {{"Cache-Control", "no-cache"}};
  res.stream = [stream](ResponseStream& out) { stream->run(out); };
  return res;
}

}  // namespace pagoda::server
