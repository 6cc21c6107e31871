#pragma once
// The chat page at GET / (examples/server/webui/index.html, compiled into the binary by
// examples/server/webui/embed.cmake): a browser client of /v1/chat/completions.

#include <httplib.h>

namespace pagoda::server {

// Registers GET / answering the page. The page itself needs no API key; its requests to /v1/
// carry the one typed into its settings.
void install_webui(httplib::Server& server);

}  // namespace pagoda::server
