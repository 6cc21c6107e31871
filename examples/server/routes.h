#pragma once
// The HTTP API on httplib: the OpenAI endpoints, vLLM's adapter endpoints, /health and
// /metrics, the chat page at /; the bearer-token check in front of /v1/; errors in OpenAI's JSON.

#include <atomic>
#include <cstddef>
#include <string>

#include <httplib.h>

#include "examples/server/model_names.h"
#include "examples/server/server_metrics.h"
#include "pagoda/engine.h"

namespace pagoda::server {

struct RouteOptions {
  std::string api_key;    // empty: no authentication
  size_t max_body = 0;    // bytes; larger bodies get 413
  bool webui = true;      // the chat page at /
};

class Routes {
 public:
  Routes(Engine& engine, ModelNames& names, ServerMetrics& metrics, RouteOptions options)
      : engine_(engine), names_(names), metrics_(metrics), options_(std::move(options)) {}

  // Registers every route, the authentication check and the error pages on `server`.
  void install(httplib::Server& server);

  // From now on generation requests get 503 and /health reports the shutdown.
  void begin_shutdown() { shutting_down_.store(true); }

 private:
  void generate(int endpoint, const httplib::Request& req, httplib::Response& res);
  void models(httplib::Response& res) const;
  void load_adapter(const httplib::Request& req, httplib::Response& res);
  void unload_adapter(const httplib::Request& req, httplib::Response& res);

  Engine& engine_;
  ModelNames& names_;
  ServerMetrics& metrics_;
  RouteOptions options_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<uint64_t> serial_{1};
};

}  // namespace pagoda::server
