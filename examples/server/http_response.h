#pragma once
// A route's answer: a status, headers and a body, or a stream of chunks (server-sent events)
// that a worker thread writes through a ResponseStream until it returns.

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pagoda::server {

// Where a streamed body goes. Each write waits until the bytes are on their way, up to the
// server's write deadline; false when they could not be (the client left or stopped reading).
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  virtual bool write(std::string_view bytes) = 0;
  // Whether the client has closed its side (noticed without writing, so an idle stream sees it).
  virtual bool client_gone() const = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Set: the body is chunked and written by this, on the worker thread that made the response.
  std::function<void(ResponseStream&)> stream;
  bool close = false;  // answer with Connection: close and close after it

  static HttpResponse json(int status, std::string body) {
    HttpResponse r;
    r.status = status;
    r.content_type = "application/json";
    r.body = std::move(body);
    return r;
  }
};

}  // namespace pagoda::server
