#include "examples/loadgen/disk_tier_dir.h"

#include <stdlib.h>  // mkdtemp

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "pagoda/error.h"

namespace pagoda::loadgen {
namespace fs = std::filesystem;

namespace {

std::string fresh_temporary_dir() {
  std::string pattern = (fs::temp_directory_path() / "pagoda-loadgen-kv-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw Error(pattern + ": cannot make a directory: " + std::strerror(errno));
  return pattern;
}

}  // namespace

DiskTierDir::DiskTierDir(const std::string& given)
    : path_(given.empty() ? fresh_temporary_dir() : given), made_here_(given.empty()) {
  if (!made_here_) fs::create_directories(path_);
}

DiskTierDir::~DiskTierDir() {
  std::error_code ignored;  // a directory left behind is not worth failing the run for
  if (made_here_) fs::remove_all(path_, ignored);
}

}  // namespace pagoda::loadgen
