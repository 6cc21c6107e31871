#pragma once
// Pillow (Debian's python3-pil, with numpy) as the reference for pagoda's image decoding and
// preprocessing: the scripts in tests/image write images and what Pillow makes of them into a
// scratch folder, and the tests compare pagoda's results with those files.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/image/image.h"

namespace pagoda::test {

// Why the reference cannot run here (no /usr/bin/python3, or no PIL or numpy module), or "".
std::string pil_missing();

// Runs /usr/bin/python3 tests/image/<script> <args>; its stdout, or throws when it fails.
std::string run_pil_script(const std::string& script, const std::string& args);

// A file of raw RGB bytes as an image of width × height (throws when its size does not match).
RgbImage read_rgb_file(const std::string& path, int32_t width, int32_t height);

// How two images of the same size differ: pixels with any channel off, and the largest
// difference of a channel (0 and 0 when they are equal; -1 when their sizes differ).
struct ImageDifference {
  int64_t pixels_off = 0;
  int64_t channels_off_by_one = 0;
  int max_step = 0;
};
ImageDifference compare_images(const RgbImage& got, const RgbImage& want);

}  // namespace pagoda::test
