#include "examples/server/api_format.h"

#include "examples/server/messages_format.h"
#include "examples/server/openai_format.h"
#include "examples/server/responses_format.h"

namespace pagoda::server {

std::unique_ptr<ApiFormat> make_api_format(const ApiRequest& request, const ResponseHeader& header) {
  switch (request.endpoint) {
    case Endpoint::Completions:
    case Endpoint::ChatCompletions: return make_openai_format(request, header);
    case Endpoint::Messages: return make_messages_format(request, header);
    case Endpoint::Responses: return make_responses_format(request, header);
  }
  throw ApiError(500, "no answer format for this endpoint", "server_error");
}

}  // namespace pagoda::server
