#pragma once
// One line on stderr per answered request, in the spirit of the common log format:
//   2026-11-23T05:20:01Z 127.0.0.1 "POST /v1/completions" 200 412

#include <cstddef>

#include "examples/server/http_request.h"

namespace pagoda::server {

// `bytes`: the body sent (a stream's data, without its chunk framing).
void log_access(const HttpRequest& req, int status, size_t bytes);

}  // namespace pagoda::server
