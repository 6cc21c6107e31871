#pragma once
// Images as the vision encoders take them: decoded 8-bit RGB pixels, and the normalized
// float planes a preprocessor makes of them.

#include <cstdint>
#include <vector>

namespace pagoda {

// 8-bit RGB, row-major, three bytes per pixel (R, G, B), no padding: rgb.size() == 3·width·height.
struct RgbImage {
  int32_t width = 0;
  int32_t height = 0;
  std::vector<uint8_t> rgb;
};

// An encoder's input: float values channel by channel (R, G, B), each channel row by row:
// values.size() == 3·width·height, values[(c·height + y)·width + x].
struct PixelPlanes {
  int32_t width = 0;
  int32_t height = 0;
  std::vector<float> values;
};

}  // namespace pagoda
