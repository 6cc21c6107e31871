#pragma once
// A vocabulary's pieces (as it spells them) → token id, looked up by string_view.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace pagoda {

struct PieceHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using PieceMap = std::unordered_map<std::string, int32_t, PieceHash, std::equal_to<>>;

}  // namespace pagoda
