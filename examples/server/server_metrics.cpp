#include "examples/server/server_metrics.h"

#include <cstdio>

namespace pagoda::server {

namespace {

std::string number(double x) {
  char text[64];
  std::snprintf(text, sizeof text, "%.10g", x);
  return text;
}

void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, double value, const char* type, const std::string& help) {
  header(out, name, type, help);
  out += name + " " + number(value) + "\n";
}

// One series per prefix-cache tier: {tier="ram"} and {tier="disk"}.
void per_tier(std::string& out, const std::string& name, double ram, double disk, const char* type,
              const std::string& help) {
  header(out, name, type, help);
  out += name + "{tier=\"ram\"} " + number(ram) + "\n" + name + "{tier=\"disk\"} " + number(disk) + "\n";
}

// The prefix cache's tiers (EngineConfig::kv_disk_path): hits and evictions per tier, and the
// disk tier's files, traffic, backlog and damage.
void tier_figures(std::string& out, const EngineMetrics& e) {
  per_tier(out, "pagoda_kv_tier_hit_tokens_total", double(e.prefix_hit_tokens - e.kv_disk_hit_tokens),
           double(e.kv_disk_hit_tokens), "counter",
           "prompt tokens taken from each prefix cache tier instead of computed");
  per_tier(out, "pagoda_kv_tier_evictions_total", double(e.kv_ram_evictions), double(e.kv_disk_evictions), "counter",
           "cached pages (RAM) and page files (disk) given up for room");
  sample(out, "pagoda_kv_disk_pages", double(e.kv_disk_pages), "gauge", "page files in the disk tier");
  sample(out, "pagoda_kv_disk_bytes", double(e.kv_disk_bytes), "gauge", "bytes of page files in the disk tier");
  sample(out, "pagoda_kv_disk_read_bytes_total", double(e.kv_disk_read_bytes), "counter", "bytes read back from disk");
  sample(out, "pagoda_kv_disk_written_bytes_total", double(e.kv_disk_written_bytes), "counter",
         "bytes written to disk");
  sample(out, "pagoda_kv_disk_write_backlog", double(e.kv_disk_write_backlog), "gauge",
         "pages waiting to be written to disk");
  sample(out, "pagoda_kv_disk_writes_skipped_total", double(e.kv_disk_writes_skipped), "counter",
         "pages let go by the pool before their turn to be written to disk");
  sample(out, "pagoda_kv_disk_damaged_total", double(e.kv_disk_damaged), "counter",
         "torn, truncated or corrupted page files found, dropped and recomputed");
}

const char* outcome_label(Outcome o) {
  switch (o) {
    case Outcome::Stop: return "stop";
    case Outcome::Length: return "length";
    case Outcome::Cancelled: return "cancelled";
    case Outcome::ClientError: return "client_error";
    case Outcome::ServerError: return "server_error";
  }
  return "?";
}

}  // namespace

void Histogram::observe(double value) {
  size_t bucket = 0;
  while (bucket < bounds_.size() && value > bounds_[bucket]) ++bucket;
  std::lock_guard lock(mutex_);
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& help) const {
  header(out, name, "histogram", help);
  std::lock_guard lock(mutex_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}),
      tpot_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}),
      latency_({0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}) {}

void ServerMetrics::record(const Completion& c, double latency_s) {
  prompt_tokens_.fetch_add(uint64_t(c.prompt_tokens), std::memory_order_relaxed);
  generation_tokens_.fetch_add(c.token_ids.size(), std::memory_order_relaxed);
  if (!c.token_ids.empty()) ttft_.observe(c.time_to_first_token_s);
  if (c.token_ids.size() > 1) tpot_.observe(c.time_per_output_token_s);
  latency_.observe(latency_s);
}

// Reads a member EngineMetrics may not have yet (the prefix cache's figures), so the server
// exposes them as soon as the engine reports them.
template <typename M>
void prefix_cache_figures(std::string& out, const M& m) {
  if constexpr (requires { m.kv_pages_cached; }) {
    sample(out, "pagoda_kv_pages_cached", double(m.kv_pages_cached), "gauge", "KV pages held only by the prefix cache");
  }
  if constexpr (requires {
                  m.prefix_hit_tokens;
                  m.prefix_queried_tokens;
                }) {
    sample(out, "pagoda_prefix_cache_hit_tokens_total", double(m.prefix_hit_tokens), "counter",
           "prompt tokens found in the prefix cache");
    sample(out, "pagoda_prefix_cache_queried_tokens_total", double(m.prefix_queried_tokens), "counter",
           "prompt tokens looked up in the prefix cache");
    const double rate =
        m.prefix_queried_tokens > 0 ? double(m.prefix_hit_tokens) / double(m.prefix_queried_tokens) : 0.0;
    sample(out, "pagoda_prefix_cache_hit_rate", rate, "gauge", "prefix cache hit tokens over queried tokens");
  }
}

std::string ServerMetrics::exposition(const EngineMetrics& e) const {
  std::string out;
  header(out, "pagoda_requests_total", "counter", "requests answered, by outcome");
  for (int o = 0; o < kOutcomes; ++o) {
    out += std::string("pagoda_requests_total{outcome=\"") + outcome_label(Outcome(o)) + "\"} " +
           std::to_string(outcomes_[size_t(o)].load(std::memory_order_relaxed)) + "\n";
  }
  sample(out, "pagoda_prompt_tokens_total", double(prompt_tokens_.load()), "counter", "prompt tokens of requests run");
  sample(out, "pagoda_generation_tokens_total", double(generation_tokens_.load()), "counter", "tokens generated");
  ttft_.write(out, "pagoda_time_to_first_token_seconds", "time from submission to the first token");
  tpot_.write(out, "pagoda_time_per_output_token_seconds", "mean time between a request's tokens after the first");
  latency_.write(out, "pagoda_request_latency_seconds", "time from submission to the last token");

  sample(out, "pagoda_num_requests_waiting", double(e.queued), "gauge", "requests submitted and not yet admitted");
  sample(out, "pagoda_num_requests_running", double(e.running), "gauge", "requests prefilling or decoding");
  sample(out, "pagoda_preemptions_total", double(e.preempted), "counter", "preemptions so far");
  sample(out, "pagoda_kv_pages_used", double(e.kv_pages_used), "gauge", "KV pages held by sequences");
  sample(out, "pagoda_kv_pages_free", double(e.kv_pages_free), "gauge", "KV pages free");
  sample(out, "pagoda_kv_pages_total", double(e.kv_pages_total), "gauge", "KV pages in the cache");
  prefix_cache_figures(out, e);
  tier_figures(out, e);
  sample(out, "pagoda_engine_tokens_per_second", e.tokens_per_second, "gauge",
         "generated tokens over the engine's busy time");
  sample(out, "pagoda_lora_adapters_resident", double(e.adapters_resident), "gauge",
         "LoRA adapters packed for the kernels");
  sample(out, "pagoda_lora_adapter_swaps_total", double(e.adapter_swaps), "counter", "adapters made resident so far");
  sample(out, "pagoda_lora_adapter_swap_seconds_total", e.adapter_swap_seconds, "counter",
         "time spent packing adapters");
  sample(out, "pagoda_speculative_proposed_tokens_total", double(e.speculative_proposed), "counter",
         "guessed tokens verified by speculative decoding");
  sample(out, "pagoda_speculative_accepted_tokens_total", double(e.speculative_accepted), "counter",
         "guessed tokens equal to the token sampled in their place");
  sample(out, "pagoda_speculative_acceptance_rate", e.speculative_acceptance, "gauge",
         "accepted over proposed guesses");
  return out;
}

}  // namespace pagoda::server
