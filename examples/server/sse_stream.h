#pragma once
// A submitted request (its n choices) streamed to the client as server-sent events: one
// `data: {chunk}` per piece of text of a choice (and, when asked for, one per token with its
// logprobs), each choice's last chunk with its finish reason (the usage on the very last), an
// optional usage-only chunk, then `data: [DONE]`. A client that goes away cancels the
// requests, so their KV pages come back at once.

#include <chrono>
#include <memory>
#include <vector>

#include <httplib.h>

#include "examples/server/openai_request.h"
#include "examples/server/openai_response.h"
#include "examples/server/server_metrics.h"
#include "pagoda/request.h"

namespace pagoda::server {

// Makes `res` a chunked text/event-stream that pulls the choices' tokens (handle i is choice
// i) as httplib writes. The handles must come from Requests submitted with `stream = true`.
void stream_events(httplib::Response& res, std::vector<RequestHandle> handles, const ApiRequest& request,
                   ResponseHeader header, ServerMetrics& metrics, const Engine& engine);

}  // namespace pagoda::server
