#include "engine/chat/special_split.h"

#include <algorithm>
#include <array>
#include <utility>

namespace pagoda::chat {

std::vector<Piece> split_special(std::string_view text, std::vector<Special> specials) {
  std::erase_if(specials, [](const Special& s) { return s.text.empty(); });
  std::stable_sort(specials.begin(), specials.end(),
                   [](const Special& a, const Special& b) { return a.text.size() > b.text.size(); });
  std::array<bool, 256> starts{};  // bytes a special can start with: the rest is skipped fast
  for (const Special& s : specials) starts[static_cast<unsigned char>(s.text[0])] = true;

  std::vector<Piece> out;
  std::string run;
  for (size_t i = 0; i < text.size();) {
    const Special* hit = nullptr;
    if (starts[static_cast<unsigned char>(text[i])]) {
      for (const Special& s : specials) {
        if (text.substr(i).starts_with(s.text)) {
          hit = &s;
          break;
        }
      }
    }
    if (!hit) {
      run += text[i++];
      continue;
    }
    if (!run.empty()) out.push_back({std::exchange(run, {}), -1});
    out.push_back({hit->text, hit->id});
    i += hit->text.size();
  }
  if (!run.empty()) out.push_back({std::move(run), -1});
  return out;
}

}  // namespace pagoda::chat
