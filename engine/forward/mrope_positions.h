#pragma once
// The rotary positions of an M-RoPE model (Qwen2-VL, Qwen2.5-VL) for one KV position of a
// sequence: text turns all sections by one position, an image's row at (y, x) by (t, t + y,
// t + x), and each image advances the positions after it by max(rows, cols) instead of by its
// rows × cols KV positions, as transformers' get_rope_index and llama.cpp's qwen2vl-cli place
// them. The fourth section (llama.cpp's "extra") stays at 0.

#include <array>
#include <cstdint>
#include <span>

#include "engine/forward/batch.h"

namespace pagoda {

// (temporal, height, width, extra) of KV position `position`, given the sequence's images
// `grids` (sorted, disjoint).
std::array<int32_t, 4> mrope_position(std::span<const ImageGrid> grids, int32_t position);

}  // namespace pagoda
