#pragma once
// Anthropic's Messages answers (ApiFormat): a `message`, or its stream of named events
// (protocol/anthropic_messages), for POST /v1/messages.

#include <memory>

#include "examples/server/api_format.h"

namespace pagoda::server {

std::unique_ptr<ApiFormat> make_messages_format(const ApiRequest& request, const ResponseHeader& header);

}  // namespace pagoda::server
