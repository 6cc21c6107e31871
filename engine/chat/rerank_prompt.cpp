#include "engine/chat/rerank_prompt.h"

#include <algorithm>

namespace pagoda {

ChatPrompt render_rerank_prompt(std::string_view rerank_template, std::string_view query, std::string_view document) {
  static constexpr std::string_view kQuery = "{query}", kDocument = "{document}";
  ChatPrompt out;
  size_t at = 0;
  while (at < rerank_template.size()) {
    const size_t q = rerank_template.find(kQuery, at), d = rerank_template.find(kDocument, at);
    const size_t next = std::min(q, d);
    if (next == std::string_view::npos) break;
    out.text.append(rerank_template.substr(at, next - at));
    const bool is_query = next == q;
    const std::string_view data = is_query ? query : document;
    if (!data.empty()) {
      out.data_spans.push_back({out.text.size(), out.text.size() + data.size()});
      out.text.append(data);
    }
    at = next + (is_query ? kQuery : kDocument).size();
  }
  out.text.append(rerank_template.substr(std::min(at, rerank_template.size())));
  return out;
}

}  // namespace pagoda
