#pragma once
// A listen backlog for bursts of connections.
//
// Debian's cpp-httplib (a shared library, 0.11) listens with a backlog of 5, fixed when it was
// built. 256 clients connecting at once overflow it: the kernel answers with SYN cookies, and
// some of those connections are reset before the server reads them (the client sees a read
// error with no response; measured: 101 of 1024 streamed requests, exactly the host's
// SyncookiesFailed count over the run). listen() again on the bound socket sets a new backlog
// in place (Linux), so the server captures its listening socket and raises it.

#include <httplib.h>

namespace pagoda::server {

class ListenBacklog {
 public:
  // Remembers the socket `server` creates from now on (keeping httplib's default options).
  explicit ListenBacklog(httplib::Server& server);

  // After bind_to_port/bind_to_any_port: the backlog becomes the system's maximum
  // (net.core.somaxconn). Throws pagoda::Error when listen() refuses.
  void raise() const;

 private:
  socket_t socket_ = INVALID_SOCKET;
};

}  // namespace pagoda::server
