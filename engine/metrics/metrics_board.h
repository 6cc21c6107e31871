#pragma once
// Counters the actors update and Engine::metrics() reads: relaxed atomics, written by their
// one owner each, so reading them never stops an actor.

#include <atomic>
#include <cstdint>

namespace pagoda {

struct MetricsBoard {
  std::atomic<int64_t> queued{0};
  std::atomic<int64_t> running{0};
  std::atomic<int64_t> preempted{0};
  std::atomic<int64_t> finished{0};
  std::atomic<int64_t> generated_tokens{0};
  std::atomic<int64_t> pages_used{0};
  std::atomic<int64_t> pages_total{0};
  std::atomic<int64_t> pages_cached{0};           // named, held by nobody, evictable
  std::atomic<int64_t> prefix_hit_tokens{0};      // prompt tokens admissions found cached
  std::atomic<int64_t> prefix_queried_tokens{0};  // prompt tokens admissions looked up
  std::atomic<int64_t> busy_ns{0};                // time the decode scheduler spent on steps
  std::atomic<int64_t> adapter_swaps{0};
  std::atomic<int64_t> adapter_swap_ns{0};
  std::atomic<int64_t> adapters_resident{0};
  std::atomic<int64_t> speculative_proposed{0};  // guesses verified
  std::atomic<int64_t> speculative_accepted{0};  // of them, equal to the sampled token
  std::atomic<int64_t> draft_pages_used{0};      // the draft model's KV pool (EngineConfig::draft_model_path)
  std::atomic<int64_t> draft_pages_total{0};
  // The prefix cache's tiers: the page-pool actor's (the index's) counts and the disk-tier
  // actor's (its reads and writes).
  std::atomic<int64_t> ram_evictions{0};
  std::atomic<int64_t> disk_pages{0};
  std::atomic<int64_t> disk_bytes{0};
  std::atomic<int64_t> disk_write_backlog{0};
  std::atomic<int64_t> disk_writes_skipped{0};
  std::atomic<int64_t> disk_evictions{0};
  std::atomic<int64_t> disk_hit_tokens{0};
  std::atomic<int64_t> disk_read_bytes{0};
  std::atomic<int64_t> disk_written_bytes{0};
  std::atomic<int64_t> disk_write_errors{0};
  std::atomic<int64_t> disk_damaged{0};
};

}  // namespace pagoda
