#pragma once
// The machine's streaming-read bandwidth with all cores, measured in the benchmark's own
// process: what single-stream decode, which reads every weight once per token, is bound by.
// The loop prefetches 4 KiB ahead into L2 as the weight kernels do (the hardware prefetcher
// stops at page boundaries): the best a stream gets here, so a roofline is not flattered.

#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <vector>

namespace pagoda::bench {

inline constexpr std::size_t kReadBytes = std::size_t(1) << 30;  // far beyond any L3

// Every core sums its share of `words` 8-byte words; returns the sum (to keep it alive).
inline double stream_read(tbb::task_arena& arena, const uint64_t* data, std::size_t words) {
  const int cores = arena.max_concurrency();
  std::vector<uint64_t> sums(cores);
  arena.execute([&] {
    tbb::parallel_for(0, cores, [&](int t) {
      const std::size_t begin = words * t / cores, end = words * (t + 1) / cores;
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (std::size_t i = begin; i + 4 <= end; i += 4) {
        if (i % 8 == 0) __builtin_prefetch(data + i + 512, 0, 2);
        s0 += data[i], s1 += data[i + 1], s2 += data[i + 2], s3 += data[i + 3];
      }
      sums[t] = s0 + s1 + s2 + s3;
    }, tbb::static_partitioner());
  });
  return double(std::accumulate(sums.begin(), sums.end(), uint64_t(0)));
}

inline std::vector<uint64_t>& read_buffer() {
  static std::vector<uint64_t> buffer(kReadBytes / 8, 1);
  return buffer;
}

// Bytes/s, best of five passes over the 1 GiB buffer, measured once per process.
inline double read_bandwidth() {
  static const double bandwidth = [] {
    tbb::task_arena arena(tbb::info::default_concurrency());
    std::vector<uint64_t>& b = read_buffer();
    volatile double sink = stream_read(arena, b.data(), b.size());
    double best = 0;
    for (int run = 0; run < 5; ++run) {
      const auto start = std::chrono::steady_clock::now();
      sink = stream_read(arena, b.data(), b.size());
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      best = std::max(best, double(kReadBytes) / elapsed.count());
    }
    (void)sink;
    return best;
  }();
  return bandwidth;
}

}  // namespace pagoda::bench
