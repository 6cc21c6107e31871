#pragma once
// A request as the routes see it: what the HTTP layer (http_session.cpp, on Boost.Beast) read
// off a connection, complete, body included, so no route depends on Beast's types.

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pagoda::server {

struct HttpRequest {
  std::string method;       // "GET", "POST", ...
  std::string path;         // the target up to '?'
  std::string remote_addr;  // the peer's address, for the access log
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Whether the client has hung up, for a handler run on a worker; empty otherwise.
  std::function<bool()> client_gone;

  // The first header of that name (compared without case), or "".
  std::string_view header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n.size() != name.size()) continue;
      bool same = true;
      for (size_t i = 0; i < n.size() && same; ++i) same = (n[i] | 0x20) == (name[i] | 0x20);
      if (same) return v;
    }
    return {};
  }
};

}  // namespace pagoda::server
