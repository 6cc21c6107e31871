#pragma once
// A submitted request (its n choices) streamed to the client as server-sent events: one
// `data: {chunk}` per piece of text of a choice (and, when asked for, one per token with its
// logprobs), each choice's last chunk with its finish reason (the usage on the very last), an
// optional usage-only chunk, then `data: [DONE]`. A client that goes away cancels the
// requests, so their KV pages come back at once. Requests the server cancels (its shutdown
// timeout passed) still end properly: each choice's last chunk has finish_reason "length" (the
// output was cut short; OpenAI's own value, where vLLM's "abort" is not one), then [DONE].

#include <chrono>
#include <memory>
#include <vector>

#include "examples/server/http_response.h"
#include "examples/server/openai_request.h"
#include "examples/server/openai_response.h"
#include "examples/server/server_metrics.h"
#include "pagoda/request.h"

namespace pagoda::server {

// A text/event-stream answer whose stream function pulls the choices' tokens (handle i is
// choice i) and writes them as they come. The handles must come from Requests submitted with
// `stream = true`.
HttpResponse stream_events(std::vector<RequestHandle> handles, const ApiRequest& request, ResponseHeader header,
                           ServerMetrics& metrics, const Engine& engine);

}  // namespace pagoda::server
