#pragma once
// Every API's request body → an ApiRequest, through the one parser (openai_request): OpenAI's
// chat and completions bodies directly, Anthropic's Messages and OpenAI's Responses bodies
// translated to chat bodies first (protocol/anthropic_messages, protocol/responses_api), their
// max_tokens then bounding the reply with the room the context leaves. Throws ApiError (400
// naming the field, 404 for an unknown model), as parse_api_request does.

#include <string>

#include "examples/server/model_names.h"
#include "examples/server/openai_request.h"
#include "pagoda/engine.h"

namespace pagoda::server {

ApiRequest parse_request(Endpoint endpoint, const std::string& body, const Engine& engine, const ModelNames& names,
                         bool special_in_content = false);

// Anthropic's /v1/messages/count_tokens: the prompt's length as /v1/messages would read it.
int64_t count_message_tokens(const std::string& body, const Engine& engine, const ModelNames& names,
                             bool special_in_content = false);

}  // namespace pagoda::server
