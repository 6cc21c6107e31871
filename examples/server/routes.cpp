#include "examples/server/routes.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <optional>

#include <nlohmann/json.hpp>

#include "examples/server/api_error.h"
#include "examples/server/apply_template.h"
#include "examples/server/auth.h"
#include "engine/chat/chat_reply.h"
#include "examples/server/choices.h"
#include "examples/server/openai_logprobs.h"
#include "examples/server/openai_request.h"
#include "examples/server/openai_response.h"
#include "examples/server/reply_text.h"
#include "examples/server/sse_stream.h"
#include "examples/server/webui.h"
#include "pagoda/error.h"

namespace pagoda::server {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status(), e.body()); }

ApiError shutting_down_error() { return ApiError(503, "the server is shutting down", "server_error", "service_unavailable"); }

// {"lora_name": ..., "lora_path": ...} of vLLM's adapter endpoints; the path only when asked.
std::pair<std::string, std::string> adapter_body(const std::string& text, bool needs_path) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::exception& e) {
    throw bad_request(std::string("the body is not valid JSON: ") + e.what());
  }
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

void Routes::install(httplib::Server& server) {
  server.set_payload_max_length(options_.max_body);
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path.rfind("/v1/", 0) != 0 || bearer_token_matches(req.get_header_value("Authorization"), options_.api_key)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    send_error(res, ApiError(401, "Incorrect API key provided: give 'Authorization: Bearer <key>'", "invalid_request_error",
                             "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // httplib's own refusals (no route, a body over the limit) in OpenAI's JSON too.
  server.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413) {
      send_error(res, ApiError(413, "the request body is larger than --max-body (" + std::to_string(options_.max_body) + " bytes)"));
    } else if (res.status == 404) {
      send_error(res, ApiError(404, "no route for " + req.method + " " + req.path, "invalid_request_error", "not_found"));
    } else {
      send_error(res, ApiError(res.status, "HTTP error " + std::to_string(res.status)));
    }
  });
  server.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    metrics_.count_request(Outcome::ServerError);
    send_error(res, ApiError(500, what, "server_error"));
  });

  server.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(int(Endpoint::Completions), req, res);
  });
  server.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(int(Endpoint::ChatCompletions), req, res);
  });
  server.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) { models(res); });
  server.Post("/apply-template", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      send_json(res, 200, apply_template(req.body, engine_));
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  });
  server.Post("/v1/load_lora_adapter", [this](const httplib::Request& req, httplib::Response& res) { load_adapter(req, res); });
  server.Post("/v1/unload_lora_adapter", [this](const httplib::Request& req, httplib::Response& res) { unload_adapter(req, res); });
  server.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (shutting_down_.load()) return send_json(res, 503, {{"status", "shutting down"}});
    // A replica whose model file was truncated fails every request: take it out of rotation.
    if (auto lost = engine_.model_lost()) return send_json(res, 503, {{"status", "model lost"}, {"error", *lost}});
    send_json(res, 200, {{"status", "ok"}});
  });
  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.exposition(engine_.metrics()), "text/plain; version=0.0.4; charset=utf-8");
  });
  if (options_.webui) install_webui(server);
}

void Routes::generate(int endpoint, const httplib::Request& req, httplib::Response& res) {
  const Clock::time_point start = Clock::now();
  try {
    if (shutting_down_.load()) throw shutting_down_error();
    ApiRequest a = parse_api_request(Endpoint(endpoint), req.body, engine_, names_);
    a.request.stream = a.stream || a.reply;  // a reply to split is read token by token
    const bool wants_logprobs = a.request.logprobs >= 0;
    if (a.best_of > a.n) a.request.logprobs = std::max(a.request.logprobs, 0);  // to rank the choices by
    std::vector<RequestHandle> handles;
    try {
      handles = submit_choices(engine_, a.request, a.best_of);
    } catch (const Error& e) {
      if (shutting_down_.load()) throw shutting_down_error();
      throw bad_request(e.what());
    }
    const ResponseHeader header = response_header(a, serial_.fetch_add(1));
    if (a.stream) return stream_events(res, std::move(handles), a, header, metrics_, engine_);

    std::vector<Completion> done;
    for (RequestHandle& h : handles) done.push_back(h.get());
    int64_t completion_tokens = 0;
    for (const Completion& c : done) {
      if (c.finish_reason == FinishReason::Cancelled) throw shutting_down_error();
      if (c.finish_reason == FinishReason::Error) throw ApiError(500, c.error, "server_error");
      metrics_.record(c, std::chrono::duration<double>(Clock::now() - start).count());
      completion_tokens += int64_t(c.token_ids.size());
    }
    std::vector<Choice> choices;
    std::vector<size_t> picked(done.size());
    std::iota(picked.begin(), picked.end(), size_t(0));
    if (a.best_of > a.n) picked = best_choices(done, a.n);
    for (size_t i : picked) {
      const Completion& c = done[i];
      json logprobs = nullptr;
      if (wants_logprobs) {
        // The token that ended the output (EOS, a stop id) added no text: it has no entry.
        std::span<const int32_t> tokens = c.token_ids;
        if (!tokens.empty() && is_ending_token(engine_, a.request, tokens.back())) tokens = tokens.first(tokens.size() - 1);
        logprobs = a.echo ? echo_logprobs_json(engine_, a.request.prompt_ids, c.prompt_logprobs, tokens, c.logprobs)
                          : logprobs_json(a.endpoint, engine_, tokens, c.logprobs);
      }
      if (a.reply) {
        choices.push_back(split_reply(handles[i], *a.reply, ReplyText(engine_, a.request), c.finish_reason, logprobs));
      } else {
        choices.push_back({(a.echo ? a.prompt_text : std::string()) + c.text, c.finish_reason, logprobs});
      }
    }
    metrics_.count_request(choices[0].finish_reason == FinishReason::Length ? Outcome::Length : Outcome::Stop);
    send_json(res, 200, completion_json(header, choices, done[0].prompt_tokens, completion_tokens));
  } catch (const ApiError& e) {
    metrics_.count_request(e.status() >= 500 ? Outcome::ServerError : Outcome::ClientError);
    send_error(res, e);
  }
}

void Routes::models(httplib::Response& res) const {
  const int64_t created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  json data = json::array();
  data.push_back({{"id", names_.base()}, {"object", "model"}, {"created", created}, {"owned_by", "pagoda"},
                  {"root", names_.base()}, {"parent", nullptr}, {"max_model_len", engine_.context_length()}});
  for (const ModelNames::Adapter& a : names_.adapters()) {
    data.push_back({{"id", a.name}, {"object", "model"}, {"created", created}, {"owned_by", "pagoda"},
                    {"root", a.path}, {"parent", names_.base()}, {"max_model_len", engine_.context_length()}});
  }
  send_json(res, 200, {{"object", "list"}, {"data", data}});
}

void Routes::load_adapter(const httplib::Request& req, httplib::Response& res) {
  try {
    const auto [name, path] = adapter_body(req.body, true);
    if (name == names_.base() || names_.has_adapter(name)) {
      throw bad_request("The lora adapter '" + name + "' has already been loaded.");
    }
    try {
      engine_.load_adapter(name, path);
    } catch (const Error& e) {
      throw bad_request(e.what());
    }
    names_.add_adapter(name, path);
    res.set_content("Success: LoRA adapter '" + name + "' added successfully.", "text/plain");
  } catch (const ApiError& e) {
    send_error(res, e);
  }
}

void Routes::unload_adapter(const httplib::Request& req, httplib::Response& res) {
  try {
    const std::string name = adapter_body(req.body, false).first;
    if (!names_.has_adapter(name)) {
      throw ApiError(404, "The lora adapter '" + name + "' cannot be found.", "invalid_request_error", "model_not_found");
    }
    // Gone from the names first, so no new request picks it while the engine lets go of it.
    names_.remove_adapter(name);
    try {
      engine_.unload_adapter(name);
    } catch (const Error& e) {
      throw ApiError(404, e.what(), "invalid_request_error", "model_not_found");
    }
    res.set_content("Success: LoRA adapter '" + name + "' removed successfully.", "text/plain");
  } catch (const ApiError& e) {
    send_error(res, e);
  }
}

}  // namespace pagoda::server
