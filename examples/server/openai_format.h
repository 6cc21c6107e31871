#pragma once
// OpenAI's chat completions and completions answers (ApiFormat).

#include <memory>

#include "examples/server/api_format.h"

namespace pagoda::server {

std::unique_ptr<ApiFormat> make_openai_format(const ApiRequest& request, const ResponseHeader& header);

}  // namespace pagoda::server
