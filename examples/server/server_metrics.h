#pragma once
// What the server counts (requests by outcome, tokens, latency histograms) and the
// Prometheus text exposition of it together with the engine's own figures.

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "pagoda/engine.h"

namespace pagoda::server {

// How a request ended, the `outcome` label of pagoda_requests_total.
enum class Outcome { Stop, Length, Cancelled, ClientError, ServerError };
inline constexpr int kOutcomes = 5;

// A Prometheus histogram: cumulative buckets at fixed upper bounds, a sum and a count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double value);
  void write(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();

  void count_request(Outcome outcome) { outcomes_[size_t(outcome)].fetch_add(1, std::memory_order_relaxed); }
  // A request the engine ran: its tokens and times.
  void record(const Completion& c, double latency_s);

  // The exposition: the server's counters and histograms, then the engine's gauges.
  std::string exposition(const EngineMetrics& engine) const;

 private:
  std::array<std::atomic<uint64_t>, kOutcomes> outcomes_{};
  std::atomic<uint64_t> prompt_tokens_{0};
  std::atomic<uint64_t> generation_tokens_{0};
  Histogram ttft_;
  Histogram tpot_;
  Histogram latency_;
};

}  // namespace pagoda::server
