#include "examples/server/access_log.h"

#include <cstdio>
#include <ctime>

namespace pagoda::server {

void log_access(const HttpRequest& req, int status, size_t bytes) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &utc);
  // One fprintf per line, so lines from different worker threads do not interleave.
  std::fprintf(stderr, "%s %s \"%s %s\" %d %zu\n", stamp, req.remote_addr.c_str(), req.method.c_str(), req.path.c_str(),
               status, bytes);
}

}  // namespace pagoda::server
