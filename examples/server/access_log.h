#pragma once
// One line on stderr per answered request, in the spirit of the common log format:
//   2026-11-23T05:20:01Z 127.0.0.1 "POST /v1/completions" 200 412

#include <httplib.h>

namespace pagoda::server {

void log_access(const httplib::Request& req, const httplib::Response& res);

}  // namespace pagoda::server
