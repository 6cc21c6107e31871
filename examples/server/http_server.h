#pragma once
// pagoda-server's HTTP/1.1 server on Boost.Beast: an acceptor and every connection's reads and
// writes run asynchronously on a few io threads, so a slow or idle socket costs memory, not a
// thread; handlers that block (generation) run on a WorkerPool. Limits are in HttpLimits.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "examples/server/http_limits.h"
#include "examples/server/http_request.h"
#include "examples/server/http_response.h"

namespace pagoda::server {

struct HttpShared;

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  // Whether a request's handler may block, and so runs on a worker instead of an io thread.
  using Blocks = std::function<bool(const HttpRequest&)>;

  HttpServer(HttpLimits limits, Handler handler, Blocks blocks, size_t max_workers, size_t io_threads);
  ~HttpServer();

  // Binds and listens (backlog: the system's maximum); returns the port (useful with port 0).
  // Throws pagoda::Error when it cannot.
  int listen(const std::string& host, int port);
  // Starts accepting on the io threads.
  void start();

  // From now on every answer closes its connection (the handler answers 503 meanwhile).
  void begin_drain();
  // Requests read and not yet fully answered.
  size_t in_flight() const;
  // Closes the listener and every connection and joins the io threads; with `wait_workers`,
  // then waits for the worker threads to end (only when in_flight() is 0, so they all are).
  void stop(bool wait_workers);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::server
