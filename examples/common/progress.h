#pragma once
// A run's progress on stderr: a bar redrawn in place when stderr is a terminal, else a plain
// line every few seconds (logs and CI keep readable output).

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace pagoda::loadgen {

class Progress {
 public:
  Progress(std::string label, int64_t total) : label_(std::move(label)), total_(total), tty_(isatty(STDERR_FILENO)) {}

  // How often update() wants to be called with fresh figures.
  double period_s() const { return tty_ ? 0.2 : 5.0; }

  void update(int64_t done, double elapsed_s, double tokens_per_s, double kv_fraction) {
    if (tty_) {
      constexpr int kWidth = 30;
      const int filled = total_ ? int(kWidth * done / total_) : kWidth;
      std::fprintf(stderr, "\r\033[K%s [%s%s] %lld/%lld req  %.0f tok/s  kv %.0f%%  %.1fs", label_.c_str(),
                   std::string(size_t(filled), '#').c_str(), std::string(size_t(kWidth - filled), '.').c_str(),
                   (long long)done, (long long)total_, tokens_per_s, 100.0 * kv_fraction, elapsed_s);
    } else {
      std::fprintf(stderr, "pagoda-loadgen: %s %lld/%lld requests, %.0f tok/s, kv %.0f%%, %.1f s\n", label_.c_str(),
                   (long long)done, (long long)total_, tokens_per_s, 100.0 * kv_fraction, elapsed_s);
    }
    std::fflush(stderr);
  }

  // Clears the bar, so the table that follows starts on a clean line.
  void finish() {
    if (tty_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  std::string label_;
  int64_t total_;
  bool tty_;
};

}  // namespace pagoda::loadgen
