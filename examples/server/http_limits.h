#pragma once
// The HTTP layer's bounds: every wait on a client has a deadline, and connections are capped in
// total and per client address, so what a hostile or slow client can hold is bounded.

#include <chrono>
#include <cstddef>

namespace pagoda::server {

struct HttpLimits {
  // For the whole request head, from the connection's first byte (a new connection: from its
  // accept), not per byte: a client trickling a byte a second is cut when it runs out.
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{30000};   // the whole body, after the head
  std::chrono::milliseconds idle_timeout{5000};    // a kept-alive connection between requests
  std::chrono::milliseconds write_timeout{30000};  // each write of an answer or stream chunk
  size_t max_body = 1 << 20;                       // bytes; more is 413
  size_t max_header = 64 << 10;                    // bytes of request head; more is 431
  size_t max_connections = 1024;                   // open at once; past it, 503 and close
  size_t max_connections_per_ip = 512;             // open at once from one address
};

}  // namespace pagoda::server
