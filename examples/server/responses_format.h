#pragma once
// OpenAI's Responses API (POST /v1/responses) answers as an ApiFormat: the `response` object, or
// the stream of response.* events (protocol/responses_api builds both; api_request translates
// its bodies).

#include <memory>

#include "examples/server/api_format.h"
#include "examples/server/openai_request.h"

namespace pagoda::server {

std::unique_ptr<ApiFormat> make_responses_format(const ApiRequest& request, const ResponseHeader& header);

}  // namespace pagoda::server
