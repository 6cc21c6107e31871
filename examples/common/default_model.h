#pragma once
// The model pagoda-chat runs when given none: a random-weight s15m that it writes on first use
// into the user's cache folder, so the program runs out of the box (its text means nothing).

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "testing/synth.h"

namespace pagoda::cli {

// $XDG_CACHE_HOME/pagoda (a relative XDG_CACHE_HOME is ignored, as the XDG spec says), else
// ~/.cache/pagoda, else /tmp/pagoda-cache.
inline std::filesystem::path cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && xdg[0] == '/')
    return std::filesystem::path(xdg) / "pagoda";
  if (const char* home = std::getenv("HOME"); home && home[0] != '\0') {
    return std::filesystem::path(home) / ".cache" / "pagoda";
  }
  return "/tmp/pagoda-cache";
}

struct DefaultModel {
  std::string path;
  bool written = false;  // by this call: the first use
};

// The default model's path, after writing the model if it is not there yet. It is written under
// a temporary name and renamed into place, so an interrupted first run never leaves half a file
// for the next run to load.
inline DefaultModel ensure_default_model() {
  namespace fs = std::filesystem;
  const fs::path dir = cache_dir();
  const fs::path path = dir / "s15m-random.gguf";
  if (fs::exists(path)) return {path.string(), false};
  fs::create_directories(dir);
  const fs::path partial = path.string() + ".partial-" + std::to_string(::getpid());
  try {
    write_synth_model(partial.string(), SynthSpec{synth_preset("s15m"), 1});
  } catch (...) {
    std::error_code ignored;
    fs::remove(partial, ignored);
    throw;
  }
  fs::rename(partial, path);
  return {path.string(), true};
}

}  // namespace pagoda::cli
