#include "examples/server/listen_backlog.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "pagoda/error.h"

namespace pagoda::server {

ListenBacklog::ListenBacklog(httplib::Server& server) {
  server.set_socket_options([this](socket_t socket) {
    httplib::default_socket_options(socket);
    socket_ = socket;
  });
}

void ListenBacklog::raise() const {
  if (socket_ == INVALID_SOCKET) throw Error("internal: the server has no listening socket yet");
  if (::listen(socket_, SOMAXCONN) != 0) throw Error(std::string("listen: ") + std::strerror(errno));
}

}  // namespace pagoda::server
