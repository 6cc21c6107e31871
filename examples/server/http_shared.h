#pragma once
// What every connection of an HttpServer shares: its limits, handler, worker pool, caps and
// drain state. Lives as long as the last connection (a shared_ptr each holds).

#include <atomic>
#include <cstddef>

#include "examples/server/connection_caps.h"
#include "examples/server/http_limits.h"
#include "examples/server/http_server.h"
#include "examples/server/worker_pool.h"

namespace pagoda::server {

struct HttpShared {
  HttpShared(HttpLimits l, HttpServer::Handler h, HttpServer::Blocks b, size_t max_workers)
      : limits(l),
        handler(std::move(h)),
        blocks(std::move(b)),
        pool(max_workers),
        caps(l.max_connections, l.max_connections_per_ip) {}

  const HttpLimits limits;
  const HttpServer::Handler handler;
  const HttpServer::Blocks blocks;
  WorkerPool pool;
  ConnectionCaps caps;
  std::atomic<bool> draining{false};
  std::atomic<size_t> in_flight{0};
};

}  // namespace pagoda::server
