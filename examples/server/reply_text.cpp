#include "examples/server/reply_text.h"

#include <algorithm>

namespace pagoda::server {

ReplyText::ReplyText(const Engine& engine, const Request& request) {
  const std::vector<int32_t> eog = engine.eog_ids();
  for (const Engine::SpecialToken& t : engine.special_tokens()) {
    const bool ends =
        std::binary_search(eog.begin(), eog.end(), t.id) ||
        std::find(request.stop_token_ids.begin(), request.stop_token_ids.end(), t.id) != request.stop_token_ids.end();
    if (!ends) spelled_.emplace(t.id, t.piece);
  }
}

std::string ReplyText::piece(const StreamEvent& event) const {
  if (event.text.empty() && event.token >= 0) {
    if (const auto it = spelled_.find(event.token); it != spelled_.end()) return it->second;
  }
  return event.text;
}

}  // namespace pagoda::server
