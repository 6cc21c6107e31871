#include "examples/server/sse_stream.h"

#include <optional>
#include <string>
#include <utility>

#include "examples/server/openai_logprobs.h"
#include "examples/server/reply_text.h"

namespace pagoda::server {

namespace {

using Clock = std::chrono::steady_clock;

// One choice's place in the stream.
struct ChoiceStream {
  RequestHandle handle;
  std::string echo;                                 // the prompt, to send first (completions' echo)
  bool first = true;                                // its next event is its first
  size_t text_offset = 0;                           // completions' logprobs.text_offset of its next token
  std::optional<chat::ChatReplySplitter> splitter;  // a chat reply with thinking or tool calls
};

// One stream's state, run by the worker that writes it.
struct EventStream {
  std::vector<ChoiceStream> choices;
  std::unique_ptr<ApiFormat> format;
  Endpoint endpoint;
  int32_t n;        // choices per prompt
  Request request;  // its logprobs and ending tokens
  const Engine& engine;
  ServerMetrics& metrics;
  Clock::time_point start = Clock::now();
  size_t turn = 0;                      // the choice looked at first next time, so none is starved
  std::optional<ReplyText> reply_text;  // with the choices' splitters

  // The next event of any choice: its echo, or a token's; empty when nothing came. With
  // `wait`, the first choice still streaming is waited on a little (one choice: 100 ms, as a
  // client that left must still be noticed; several: 10 ms, so the others are not held up).
  std::string next_event(bool wait) {
    for (size_t k = 0; k < choices.size(); ++k) {
      const size_t i = (turn + k) % choices.size();
      ChoiceStream& c = choices[i];
      if (!c.echo.empty()) {
        turn = i + 1;
        c.first = false;
        return format->text_event(int32_t(i), std::exchange(c.echo, {}), true, nullptr);
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
          logprobs = logprobs_json(endpoint, engine, std::span(&id, 1), std::span(&*token->logprobs, 1), c.text_offset);
          c.text_offset += engine.token_text(id).size();
        }
        if (c.splitter) {
          const chat::ChatReplySplitter::Delta d = c.splitter->feed(reply_text->piece(*token));
          if (d.empty() && logprobs.is_null()) continue;
          turn = i + 1;
          return format->reply_event(int32_t(i), d, std::exchange(c.first, false), logprobs);
        }
        if (token->text.empty() && logprobs.is_null()) continue;
        turn = i + 1;
        return format->text_event(int32_t(i), token->text, std::exchange(c.first, false), logprobs);
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

  // The events that end the stream, from the completions: each choice's end, the usage of them
  // all with the last, then the format's closing events. Choices the server cancelled (its
  // shutdown) end as Length: cut short, not finished.
  std::string ending() {
    std::vector<Completion> done;
    for (ChoiceStream& c : choices) done.push_back(c.handle.get());
    Usage usage;
    for (size_t i = 0; i < done.size(); i += size_t(n))
      usage.prompt_tokens += done[i].prompt_tokens;  // each prompt once
    bool cancelled = false;
    for (Completion& c : done) {
      if (c.finish_reason == FinishReason::Error) {
        metrics.count_request(Outcome::ServerError);
        return format->error_event(ApiError(500, c.error, "server_error"));
      }
      if (c.finish_reason == FinishReason::Cancelled) {
        cancelled = true;
        c.finish_reason = FinishReason::Length;
      } else {
        metrics.record(c, std::chrono::duration<double>(Clock::now() - start).count());
      }
      usage.completion_tokens += int64_t(c.token_ids.size());
    }
    metrics.count_request(cancelled                                       ? Outcome::Cancelled
                          : done[0].finish_reason == FinishReason::Length ? Outcome::Length
                                                                          : Outcome::Stop);
    std::string out;
    for (size_t i = 0; i < done.size(); ++i) {
      ChoiceStream& c = choices[i];
      ChoiceEnd end{.index = int32_t(i),
                    .finish = done[i].finish_reason,
                    .stop_string = done[i].stop_string,
                    .split = c.splitter.has_value(),
                    .first = c.first,
                    .usage = i + 1 == done.size() ? &usage : nullptr};
      if (c.splitter) {
        end.rest = c.splitter->finish();
        end.calls = c.splitter->calls();
      }
      out += format->choice_end(end);
    }
    return out + format->stream_end(usage);
  }

  // Writes events as the choices make them until the last; a client that leaves (or stops
  // reading past the write deadline) cancels the requests instead.
  void run(ResponseStream& out) {
    const std::string opening = format->stream_start(Usage{.prompt_tokens = int64_t(request.prompt_ids.size())});
    if (!opening.empty() && !out.write(opening)) {
      for (ChoiceStream& c : choices) c.handle.cancel();
      metrics.count_request(Outcome::Cancelled);
      return;
    }
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

HttpResponse stream_events(std::vector<RequestHandle> handles, const ApiRequest& request,
                           std::unique_ptr<ApiFormat> format, ServerMetrics& metrics, const Engine& engine) {
  auto stream = std::make_shared<EventStream>(
      EventStream{{}, std::move(format), request.endpoint, request.n, request.request, engine, metrics});
  // A stream has no best_of above n: choice i is prompt i / n's.
  for (size_t i = 0; i < handles.size(); ++i) {
    const std::string echo = request.echo ? request.prompt_texts[i / size_t(request.n)] : "";
    stream->choices.push_back({std::move(handles[i]), echo});
  }
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
