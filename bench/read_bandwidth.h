#pragma once
// The machine's streaming-read bandwidth with all cores, measured in the benchmark's own
// process: what single-stream decode, which reads every weight once per token, is bound by.
// The buffer sits on huge pages and the loop prefetches 4 KiB ahead into L2, as the weight
// kernels' memory and loops do (the hardware prefetcher stops at page boundaries): the best a
// stream gets here, so a roofline is not flattered.
//
// These virtual machines' bandwidth moves by 1.5–2× within a minute (other tenants), so a
// figure taken once at start is no bound for a test a minute later: ReadBandwidthProbe keeps
// its buffer and is sampled again beside each measurement.

#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/huge_page_memory.h"

namespace pagoda::bench {

inline constexpr std::size_t kReadBytes = std::size_t(512) << 20;  // far beyond any L3

// Every core of `arena` sums its share of `words` 8-byte words; returns the sum (to keep it alive).
inline double stream_read(tbb::task_arena& arena, const uint64_t* data, std::size_t words) {
  const int cores = arena.max_concurrency();
  std::vector<uint64_t> sums(cores);
  arena.execute([&] {
    tbb::parallel_for(
        0, cores,
        [&](int t) {
          const std::size_t begin = words * t / cores, end = words * (t + 1) / cores;
          uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
          for (std::size_t i = begin; i + 4 <= end; i += 4) {
            if (i % 8 == 0) __builtin_prefetch(data + i + 512, 0, 2);
            s0 += data[i], s1 += data[i + 1], s2 += data[i + 2], s3 += data[i + 3];
          }
          sums[t] = s0 + s1 + s2 + s3;
        },
        tbb::static_partitioner());
  });
  return double(std::accumulate(sums.begin(), sums.end(), uint64_t(0)));
}

// A read buffer of kReadBytes and the cores that read it.
class ReadBandwidthProbe {
 public:
  explicit ReadBandwidthProbe(int cores = tbb::info::default_concurrency())
      : arena_(cores), buffer_(kernels::allocate_huge_page_memory(kReadBytes)) {
    std::fill_n(words(), word_count(), uint64_t(1));  // committed, not the shared zero page
    sink_ = read();
  }

  // Bytes/s: the best of `passes` reads of the whole buffer.
  double sample(int passes = 3) {
    double best = 0;
    for (int pass = 0; pass < passes; ++pass) {
      const auto start = std::chrono::steady_clock::now();
      sink_ = read();
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      best = std::max(best, double(kReadBytes) / elapsed.count());
    }
    return best;
  }

  // One read of the whole buffer (for a benchmark loop that times it itself).
  double read() { return stream_read(arena_, words(), word_count()); }

 private:
  uint64_t* words() { return reinterpret_cast<uint64_t*>(buffer_.get()); }
  static constexpr std::size_t word_count() { return kReadBytes / sizeof(uint64_t); }

  tbb::task_arena arena_;
  kernels::HugePageMemory buffer_;
  volatile double sink_ = 0;
};

// Bytes/s, best of five reads, measured once per process (its buffer then freed): for
// benchmarks whose own runs are short beside the machine's drift.
inline double read_bandwidth() {
  static const double bandwidth = ReadBandwidthProbe().sample(5);
  return bandwidth;
}

}  // namespace pagoda::bench
