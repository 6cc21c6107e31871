#include "examples/server/webui.h"

#include "webui_page.h"  // generated in the build folder

namespace pagoda::server {

HttpResponse webui_page() {
  HttpResponse res;
  res.content_type = "text/html; charset=utf-8";
  // Nothing but this origin: the page loads no external asset, and no other site may frame it.
  res.headers = {{"Content-Security-Policy",
                  "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
                  "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
                 {"X-Content-Type-Options", "nosniff"}};
  res.body.assign(reinterpret_cast<const char*>(kWebuiPage), sizeof(kWebuiPage));
  return res;
}

}  // namespace pagoda::server
