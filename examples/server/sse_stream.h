#pragma once
// A submitted request (its n choices) streamed to the client as server-sent events, written by
// the request's ApiFormat: the format's opening events, an event per piece of text of a choice
// (and, when asked for, per token with its logprobs), each choice's end with its finish reason
// (the usage with the last), then the format's closing events (OpenAI's `data: [DONE]`). A
// client that goes away cancels the requests, so their KV pages come back at once. Requests the
// server cancels (its shutdown timeout passed) still end properly, as cut short by length
// (OpenAI's "length", where vLLM's "abort" is not one of OpenAI's values).

#include <chrono>
#include <memory>
#include <vector>

#include "examples/server/api_format.h"
#include "examples/server/http_response.h"
#include "examples/server/openai_request.h"
#include "examples/server/openai_response.h"
#include "examples/server/server_metrics.h"
#include "pagoda/request.h"

namespace pagoda::server {

// A text/event-stream answer whose stream function pulls the choices' tokens (handle i is
// choice i) and writes them as they come. The handles must come from Requests submitted with
// `stream = true`.
HttpResponse stream_events(std::vector<RequestHandle> handles, const ApiRequest& request,
                           std::unique_ptr<ApiFormat> format, ServerMetrics& metrics, const Engine& engine);

}  // namespace pagoda::server
