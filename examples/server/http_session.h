#pragma once
// One accepted connection served by Boost.Beast (http_session.cpp): reads requests under the
// head and body deadlines, answers each (blocking handlers on the worker pool, streamed bodies
// chunk by chunk under the write deadline), keeps the connection alive between requests up to
// the idle timeout.

#include <memory>

#include <boost/asio/ip/tcp.hpp>

#include "examples/server/connection_caps.h"
#include "examples/server/http_shared.h"

namespace pagoda::server {

// Serves `socket` (its executor a strand) until it closes. With an empty `slot` (a cap was
// reached) answers 503 with Connection: close instead of reading a request.
void serve_connection(boost::asio::ip::tcp::socket socket, ConnectionSlot slot, std::shared_ptr<HttpShared> shared);

}  // namespace pagoda::server
