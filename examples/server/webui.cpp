#include "examples/server/webui.h"

#include "webui_page.h"  // generated in the build folder

namespace pagoda::server {

void install_webui(httplib::Server& server) {
  server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    // Nothing but this origin: the page loads no external asset, and no other site may frame it.
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
                   "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_content(reinterpret_cast<const char*>(kWebuiPage), sizeof(kWebuiPage), "text/html; charset=utf-8");
  });
}

}  // namespace pagoda::server
