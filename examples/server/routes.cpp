#include "examples/server/routes.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <nlohmann/json.hpp>

#include "examples/server/api_error.h"
#include "examples/server/api_format.h"
#include "examples/server/api_request.h"
#include "examples/server/apply_template.h"
#include "examples/server/auth.h"
#include "examples/server/json_body.h"
#include "protocol/chat_reply.h"
#include "examples/server/choices.h"
#include "examples/server/embeddings_api.h"
#include "examples/server/openai_logprobs.h"
#include "examples/server/openai_request.h"
#include "examples/server/openai_response.h"
#include "examples/server/reply_text.h"
#include "examples/server/rerank_api.h"
#include "examples/server/sse_stream.h"
#include "examples/server/tokenize_api.h"
#include "examples/server/webui.h"
#include "protocol/anthropic_messages.h"
#include "pagoda/error.h"

namespace pagoda::server {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

HttpResponse json_response(int status, const json& body) { return HttpResponse::json(status, dump_json(body)); }
HttpResponse ordered_json_response(int status, const nlohmann::ordered_json& body) {
  return HttpResponse::json(status, dump_json(body));
}

// An error in the shape of the API that was called: Anthropic's for Messages, else OpenAI's.
HttpResponse error_response(const ApiError& e, Endpoint api = Endpoint::ChatCompletions) {
  if (api == Endpoint::Messages) {
    return ordered_json_response(e.status(), anthropic::error_json(e.status(), e.what()));
  }
  return json_response(e.status(), e.body());
}

// The API a path belongs to, for the shape of its errors.
Endpoint api_of(const std::string& path) {
  return path.starts_with("/v1/messages") ? Endpoint::Messages : Endpoint::ChatCompletions;
}

ApiError shutting_down_error() {
  return ApiError(503, "the server is shutting down", "server_error", "service_unavailable");
}

// {"lora_name": ..., "lora_path": ...} of vLLM's adapter endpoints; the path only when asked.
std::pair<std::string, std::string> adapter_body(const std::string& text, bool needs_path) {
  const nlohmann::ordered_json body = parse_request_body(text);
  auto string_field = [&](const char* name) {
    if (!body.is_object() || !body.contains(name) || !body[name].is_string() || body[name].get<std::string>().empty()) {
      throw bad_request(std::string("'") + name + "' must be a non-empty string");
    }
    return body[name].get<std::string>();
  };
  const std::string name = string_field("lora_name");
  return {name, needs_path ? string_field("lora_path") : std::string()};
}

// A finished chat reply, split into text, thinking and tool calls from its token stream.
Choice split_reply(RequestHandle& handle, const chat::ReplyShape& shape, const ReplyText& text, FinishReason finish,
                   json logprobs) {
  chat::ChatReplySplitter splitter(shape);
  Choice choice{.text = {}, .finish_reason = finish, .logprobs = std::move(logprobs)};
  auto take = [&](const chat::ChatReplySplitter::Delta& d) {
    choice.reasoning += d.reasoning;
    choice.text += d.content;
  };
  while (std::optional<StreamEvent> e = handle.next_token()) take(splitter.feed(text.piece(*e)));
  take(splitter.finish());
  choice.tool_calls = splitter.calls();
  return choice;
}

}  // namespace

bool Routes::authorized(const HttpRequest& req) const {
  // Open without a key: the probes and the chat page (whose own requests carry the key).
  // Everything else, present routes, future ones and unknown paths alike, needs the API key.
  if (req.method == "GET" && req.path == "/health") return true;
  if (req.method == "GET" && req.path == "/metrics") {
    return api_key_matches(req.header("Authorization"), req.header("x-api-key"), options_.metrics_key);
  }
  if (req.method == "GET" && req.path == "/" && options_.webui) return true;
  return api_key_matches(req.header("Authorization"), req.header("x-api-key"), options_.api_key);
}

Engine& Routes::ready_engine() const {
  Engine* e = loaded_.load();
  if (!e) throw ApiError(503, "the model is still loading", "server_error", "service_unavailable");
  return *e;
}

HttpResponse Routes::handle(const HttpRequest& req) {
  try {
    if (!authorized(req)) {
      throw ApiError(401, "Incorrect API key provided: give 'Authorization: Bearer <key>' or 'x-api-key: <key>'",
                     "invalid_request_error", "invalid_api_key");
    }
    if (req.method == "GET" && req.path == "/health") return health();
    if (shutting_down_.load() && !(req.method == "GET" && req.path == "/metrics")) {
      HttpResponse res = error_response(shutting_down_error(), api_of(req.path));
      res.close = true;
      return res;
    }
    return route(req);
  } catch (const ApiError& e) {
    return error_response(e, api_of(req.path));
  } catch (const std::exception& e) {
    metrics_.count_request(Outcome::ServerError);
    return error_response(ApiError(500, e.what(), "server_error"), api_of(req.path));
  }
}

HttpResponse Routes::route(const HttpRequest& req) {
  const bool get = req.method == "GET", post = req.method == "POST";
  if (post && req.path == "/v1/completions") return generate(int(Endpoint::Completions), req);
  if (post && req.path == "/v1/chat/completions") return generate(int(Endpoint::ChatCompletions), req);
  if (post && req.path == "/v1/messages") return generate(int(Endpoint::Messages), req);
  if (post && req.path == "/v1/responses") return generate(int(Endpoint::Responses), req);
  if (post && req.path == "/v1/messages/count_tokens") return count_tokens(req);
  if (get && req.path == "/v1/models") return models();
  if (post && req.path == "/v1/embeddings") return embeddings(req, ready_engine(), names_, shutting_down_);
  if (post &&
      (req.path == "/v1/rerank" || req.path == "/rerank" || req.path == "/v1/reranking" || req.path == "/reranking")) {
    return rerank(req, ready_engine(), names_, shutting_down_, "rerank-" + std::to_string(serial_.fetch_add(1)));
  }
  if (post && req.path == "/apply-template")
    return json_response(200, apply_template(req.body, ready_engine(), options_.special_in_content));
  if (post && req.path == "/tokenize") return ordered_json_response(200, tokenize_json(req.body, ready_engine()));
  if (post && req.path == "/detokenize") return ordered_json_response(200, detokenize_json(req.body, ready_engine()));
  if (post && req.path == "/v1/load_lora_adapter") return load_adapter(req);
  if (post && req.path == "/v1/unload_lora_adapter") return unload_adapter(req);
  if (get && req.path == "/metrics") {
    Engine* e = loaded_.load();
    HttpResponse res;
    res.content_type = "text/plain; version=0.0.4; charset=utf-8";
    res.body = metrics_.exposition(e ? e->metrics() : EngineMetrics{});
    return res;
  }
  if (get && req.path == "/" && options_.webui) return webui_page();
  throw ApiError(404, "no route for " + req.method + " " + req.path, "invalid_request_error", "not_found");
}

HttpResponse Routes::health() const {
  if (shutting_down_.load()) {
    HttpResponse res = json_response(503, {{"status", "shutting down"}});
    res.close = true;
    return res;
  }
  Engine* e = loaded_.load();
  if (!e) return json_response(503, {{"status", "loading"}});
  // A replica whose model file was truncated fails every request: take it out of rotation.
  if (auto lost = e->model_lost()) return json_response(503, {{"status", "model lost"}, {"error", *lost}});
  return json_response(200, {{"status", "ok"}});
}

HttpResponse Routes::generate(int endpoint, const HttpRequest& req) {
  const Clock::time_point start = Clock::now();
  try {
    Engine& engine = ready_engine();
    if (shutting_down_.load()) throw shutting_down_error();
    if (engine.embedding_only()) {
      // Said before the body is read: a chat template or sampling field would fail first, less clearly.
      throw bad_request(is_reranker(engine)
                            ? "the model is a reranker: it scores documents at /v1/rerank, it does not generate text"
                            : "the model is an embedding model: it serves /v1/embeddings, it does not generate text");
    }
    ApiRequest a = parse_request(Endpoint(endpoint), req.body, engine, names_, options_.special_in_content);
    a.request.stream = a.stream || a.reply;  // a reply to split is read token by token
    const bool wants_logprobs = a.request.logprobs >= 0;
    if (a.best_of > a.n) a.request.logprobs = std::max(a.request.logprobs, 0);  // to rank the choices by
    std::vector<RequestHandle> handles;
    try {
      handles = submit_prompts(engine, a);
    } catch (const Error& e) {
      if (shutting_down_.load()) throw shutting_down_error();
      throw bad_request(e.what());
    }
    std::unique_ptr<ApiFormat> format = make_api_format(a, response_header(a, serial_.fetch_add(1)));
    if (a.stream) return stream_events(std::move(handles), a, std::move(format), metrics_, engine);

    // A client that hangs up while its answer is computed cancels it, as a stream's does.
    const std::optional<std::vector<Completion>> completions = await_completions(handles, req.client_gone);
    if (!completions) {
      metrics_.count_request(Outcome::Cancelled);
      return error_response(ApiError(499, "the client closed the connection"));  // nginx's code; for the log
    }
    const std::vector<Completion>& done = *completions;
    Usage usage;
    for (size_t i = 0; i < done.size(); ++i) {
      const Completion& c = done[i];
      if (c.finish_reason == FinishReason::Cancelled) throw shutting_down_error();
      if (c.finish_reason == FinishReason::Error) throw ApiError(500, c.error, "server_error");
      metrics_.record(c, std::chrono::duration<double>(Clock::now() - start).count());
      usage.completion_tokens += int64_t(c.token_ids.size());
      if (i % size_t(a.best_of) == 0) usage.prompt_tokens += c.prompt_tokens;  // each prompt once
    }
    // Each prompt's n choices (its best n of best_of), prompt after prompt.
    std::vector<size_t> picked;
    for (size_t first = 0; first < done.size(); first += size_t(a.best_of)) {
      if (a.best_of == a.n) {
        for (int32_t k = 0; k < a.n; ++k) picked.push_back(first + size_t(k));
        continue;
      }
      const std::vector<Completion> group(done.begin() + first, done.begin() + first + size_t(a.best_of));
      for (size_t k : best_choices(group, a.n)) picked.push_back(first + k);
    }
    std::vector<Choice> choices;
    for (size_t i : picked) {
      const Completion& c = done[i];
      const size_t prompt = i / size_t(a.best_of);
      json logprobs = nullptr;
      if (wants_logprobs) {
        // The token that ended the output (EOS, a stop id) added no text: it has no entry.
        std::span<const int32_t> tokens = c.token_ids;
        if (!tokens.empty() && is_ending_token(engine, a.request, tokens.back()))
          tokens = tokens.first(tokens.size() - 1);
        logprobs = a.echo ? echo_logprobs_json(engine, a.prompts[prompt], c.prompt_logprobs, tokens, c.logprobs)
                          : logprobs_json(a.endpoint, engine, tokens, c.logprobs);
      }
      if (a.reply) {
        choices.push_back(split_reply(handles[i], *a.reply, ReplyText(engine, a.request), c.finish_reason, logprobs));
      } else {
        choices.push_back({(a.echo ? a.prompt_texts[prompt] : std::string()) + c.text, c.finish_reason, logprobs});
      }
      choices.back().stop_string = c.stop_string;
    }
    metrics_.count_request(choices[0].finish_reason == FinishReason::Length ? Outcome::Length : Outcome::Stop);
    return HttpResponse::json(200, format->whole(choices, usage));
  } catch (const ApiError& e) {
    metrics_.count_request(e.status() >= 500 ? Outcome::ServerError : Outcome::ClientError);
    return error_response(e, Endpoint(endpoint));
  }
}

HttpResponse Routes::count_tokens(const HttpRequest& req) {
  const int64_t n = count_message_tokens(req.body, ready_engine(), names_, options_.special_in_content);
  return json_response(200, {{"input_tokens", n}});
}

HttpResponse Routes::models() const {
  const Engine& engine = ready_engine();
  const int64_t created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  json data = json::array();
  data.push_back({{"id", names_.base()},
                  {"object", "model"},
                  {"created", created},
                  {"owned_by", "pagoda"},
                  {"root", names_.base()},
                  {"parent", nullptr},
                  {"max_model_len", engine.context_length()}});
  for (const ModelNames::Adapter& a : names_.adapters()) {
    data.push_back({{"id", a.name},
                    {"object", "model"},
                    {"created", created},
                    {"owned_by", "pagoda"},
                    {"root", a.path},
                    {"parent", names_.base()},
                    {"max_model_len", engine.context_length()}});
  }
  return json_response(200, {{"object", "list"}, {"data", data}});
}

HttpResponse Routes::load_adapter(const HttpRequest& req) {
  Engine& engine = ready_engine();
  try {
    const auto [name, path] = adapter_body(req.body, true);
    if (name == names_.base() || names_.has_adapter(name)) {
      throw bad_request("The lora adapter '" + name + "' has already been loaded.");
    }
    try {
      engine.load_adapter(name, path);
    } catch (const Error& e) {
      throw bad_request(e.what());
    }
    names_.add_adapter(name, path);
    HttpResponse res;
    res.body = "Success: LoRA adapter '" + name + "' added successfully.";
    return res;
  } catch (const ApiError& e) {
    return error_response(e);
  }
}

HttpResponse Routes::unload_adapter(const HttpRequest& req) {
  Engine& engine = ready_engine();
  try {
    const std::string name = adapter_body(req.body, false).first;
    if (!names_.has_adapter(name)) {
      throw ApiError(404, "The lora adapter '" + name + "' cannot be found.", "invalid_request_error",
                     "model_not_found");
    }
    // Gone from the names first, so no new request picks it while the engine lets go of it.
    names_.remove_adapter(name);
    try {
      engine.unload_adapter(name);
    } catch (const Error& e) {
      throw ApiError(404, e.what(), "invalid_request_error", "model_not_found");
    }
    HttpResponse res;
    res.body = "Success: LoRA adapter '" + name + "' removed successfully.";
    return res;
  } catch (const ApiError& e) {
    return error_response(e);
  }
}

}  // namespace pagoda::server
