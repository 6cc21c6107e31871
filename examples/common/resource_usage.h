#pragma once
// How long loading a model took and the process's peak resident memory, as the programs
// report them.

#include <sys/resource.h>

#include <chrono>
#include <cstdio>

namespace pagoda::cli {

// Peak resident set size of this process so far, in MiB (Linux reports ru_maxrss in KiB).
inline double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;
}

// Started before the model loads; report() prints "<what> in S s, peak RSS M MiB".
class LoadTimer {
 public:
  LoadTimer() : start_(std::chrono::steady_clock::now()) {}

  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

  void report(std::FILE* out, const char* prefix, const char* what) const {
    std::fprintf(out, "%s%s in %.3f s, peak RSS %.1f MiB\n", prefix, what, seconds(), peak_rss_mib());
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace pagoda::cli
