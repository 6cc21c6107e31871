#include "engine/forward/mrope_positions.h"

#include <algorithm>

namespace pagoda {

std::array<int32_t, 4> mrope_position(std::span<const ImageGrid> grids, int32_t position) {
  // How far the rotary positions have fallen behind the KV positions after the images passed.
  int32_t behind = 0;
  for (const ImageGrid& g : grids) {
    const int32_t size = g.rows * g.cols;
    if (position < g.position) break;
    if (position < g.position + size) {
      const int32_t t = g.position - behind, at = position - g.position;
      return {t, t + at / g.cols, t + at % g.cols, 0};
    }
    behind += size - std::max(g.rows, g.cols);
  }
  const int32_t p = position - behind;
  return {p, p, p, 0};
}

}  // namespace pagoda
