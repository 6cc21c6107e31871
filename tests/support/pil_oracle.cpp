#include "support/pil_oracle.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "support/test_support.h"

namespace pagoda::test {

namespace {

const char* kPython = "/usr/bin/python3";

}  // namespace

std::string pil_missing() {
  if (!std::filesystem::exists(kPython)) return std::string(kPython) + " is absent";
  const std::string probe = std::string(kPython) + " -c 'import PIL, numpy' >/dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) return "python3's PIL or numpy is absent (Debian: python3-pil, python3-numpy)";
  return "";
}

std::string run_pil_script(const std::string& script, const std::string& args) {
  const std::string command =
      std::string(kPython) + " " + PAGODA_SOURCE_DIR + "/tests/image/" + script + " " + args + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) throw std::runtime_error("could not run " + command);
  std::string output;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe.get())) > 0;) output.append(buffer, n);
  if (pclose(pipe.release()) != 0) throw std::runtime_error(command + " failed:\n" + output);
  return output;
}

RgbImage read_rgb_file(const std::string& path, int32_t width, int32_t height) {
  const std::string bytes = read_file(path);
  if (bytes.size() != size_t(width) * size_t(height) * 3) {
    throw std::runtime_error(path + " holds " + std::to_string(bytes.size()) + " bytes, not " + std::to_string(width) +
                             "x" + std::to_string(height) + " RGB");
  }
  return RgbImage{width, height, std::vector<uint8_t>(bytes.begin(), bytes.end())};
}

ImageDifference compare_images(const RgbImage& got, const RgbImage& want) {
  ImageDifference d;
  if (got.width != want.width || got.height != want.height || got.rgb.size() != want.rgb.size()) {
    d.pixels_off = d.max_step = -1;
    return d;
  }
  for (size_t i = 0; i < got.rgb.size(); i += 3) {
    bool off = false;
    for (size_t c = i; c < i + 3; ++c) {
      const int step = std::abs(int(got.rgb[c]) - int(want.rgb[c]));
      off |= step != 0;
      d.channels_off_by_one += step == 1;
      d.max_step = std::max(d.max_step, step);
    }
    d.pixels_off += off;
  }
  return d;
}

}  // namespace pagoda::test
