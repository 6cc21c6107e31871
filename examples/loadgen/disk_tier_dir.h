#pragma once
// The directory of one run's KV disk tier: the user's, kept, or a fresh one in the temporary
// directory ($TMPDIR), removed with everything in it when the run is over.

#include <string>

namespace pagoda::loadgen {

class DiskTierDir {
 public:
  // `given` empty: a fresh directory. Else `given`, made if missing.
  explicit DiskTierDir(const std::string& given);
  ~DiskTierDir();
  DiskTierDir(const DiskTierDir&) = delete;
  DiskTierDir& operator=(const DiskTierDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool made_here_;
};

}  // namespace pagoda::loadgen
