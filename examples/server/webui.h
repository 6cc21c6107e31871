#pragma once
// The chat page at GET / (examples/server/webui/index.html, compiled into the binary by
// examples/server/webui/embed.cmake): a browser client of /v1/chat/completions.

#include "examples/server/http_response.h"

namespace pagoda::server {

// The page. It needs no API key; its requests to /v1/ carry the one typed into its settings.
HttpResponse webui_page();

}  // namespace pagoda::server
