#pragma once
// A submitted request streamed to the client as server-sent events: one `data: {chunk}` per
// piece of text (and, when asked for, one per token with its logprobs), a last chunk with the finish reason and the usage, an optional usage-only
// chunk, then `data: [DONE]`. A client that goes away cancels the request, so its KV pages
// come back at once.

#include <chrono>
#include <memory>

#include <httplib.h>

#include "examples/server/openai_request.h"
#include "examples/server/openai_response.h"
#include "examples/server/server_metrics.h"
#include "pagoda/request.h"

namespace pagoda::server {

// Makes `res` a chunked text/event-stream that pulls `handle`'s tokens as httplib writes.
// The handle must come from a Request submitted with `stream = true`.
void stream_events(httplib::Response& res, RequestHandle handle, const ApiRequest& request, ResponseHeader header,
                   ServerMetrics& metrics, const Engine& engine);

}  // namespace pagoda::server
