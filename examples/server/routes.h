#pragma once
// The HTTP API: the OpenAI endpoints, the rerank endpoints (llama-server, Jina, Cohere), Anthropic's Messages, vLLM's
// adapter endpoints, /apply-template, /health and /metrics, the chat page at /; the API key (Authorization: Bearer or
// x-api-key) in front of everything but an explicit open list; errors in the called API's JSON (Anthropic's for
// /v1/messages, else OpenAI's). Answers 503 while the model loads and once shutdown begins.

#include <atomic>
#include <cstdint>
#include <string>

#include "examples/server/http_request.h"
#include "examples/server/http_response.h"
#include "examples/server/model_names.h"
#include "examples/server/openai_request.h"
#include "examples/server/server_metrics.h"
#include "pagoda/engine.h"

namespace pagoda::server {

struct RouteOptions {
  std::string api_key;      // empty: no authentication
  std::string metrics_key;  // empty: /metrics is open
  bool webui = true;        // the chat page at /
  // Parse control tokens typed into chat messages too (--special-in-content): the behaviour
  // before data spans, for trusted clients that write a template's markup into content.
  bool special_in_content = false;
};

class Routes {
 public:
  Routes(ModelNames& names, ServerMetrics& metrics, RouteOptions options)
      : names_(names), metrics_(metrics), options_(std::move(options)) {}

  // Every request's answer (the HTTP layer's handler).
  HttpResponse handle(const HttpRequest& req);
  // Whether handle() may block on the engine or the disk: such requests run on a worker.
  static bool blocks(const HttpRequest& req) { return req.method != "GET"; }

  // The model is loaded: the routes that need it answer from now on.
  void set_engine(Engine& engine) { loaded_.store(&engine); }
  bool has_engine() const { return loaded_.load() != nullptr; }
  // From now on every request but /health gets 503, and /health reports the shutdown.
  void begin_shutdown() { shutting_down_.store(true); }

 private:
  bool authorized(const HttpRequest& req) const;
  Engine& ready_engine() const;  // or ApiError 503 while the model loads
  HttpResponse route(const HttpRequest& req);
  HttpResponse health() const;
  HttpResponse generate(int endpoint, const HttpRequest& req);
  HttpResponse count_tokens(const HttpRequest& req);  // Anthropic's /v1/messages/count_tokens
  HttpResponse models() const;
  HttpResponse load_adapter(const HttpRequest& req);
  HttpResponse unload_adapter(const HttpRequest& req);

  std::atomic<Engine*> loaded_{nullptr};
  ModelNames& names_;
  ServerMetrics& metrics_;
  RouteOptions options_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<uint64_t> serial_{1};
};

}  // namespace pagoda::server
