#include "examples/server/access_log.h"

#include <cstdio>
#include <ctime>

namespace pagoda::server {

void log_access(const httplib::Request& req, const httplib::Response& res) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &utc);
  // One fprintf per line, so lines from different worker threads do not interleave.
  std::fprintf(stderr, "%s %s \"%s %s\" %d %zu\n", stamp, req.remote_addr.c_str(), req.method.c_str(), req.path.c_str(),
               res.status, res.body.size());
}

}  // namespace pagoda::server
