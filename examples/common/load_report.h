#pragma once
// pagoda-loadgen's figures: per-request records, the summary of one run (throughput, latency
// percentiles, KV use, preemptions, the prefix cache's tiers), and how they are printed as
// tables and as JSON.

#include <stdlib.h>  // getloadavg

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pagoda::loadgen {

// One request as its client saw it. Times are from the moment the client sent it.
struct RequestRecord {
  double ttft_s = 0.0;      // to the first token
  double tpot_s = -1.0;     // mean gap between tokens after the first; < 0 with one token
  double latency_s = 0.0;   // to the last token
  double finished_s = 0.0;  // when it finished, from the start of the run
  int32_t prompt_tokens = 0;
  int32_t tokens = 0;
  int32_t preemptions = 0;
  int32_t turn = 0;      // which turn of its conversation (0 without --turns)
  bool dropped = false;  // the client disconnected mid-stream on purpose (--disconnect)
};

struct Percentiles {
  double p50 = 0.0, p90 = 0.0, p95 = 0.0, p99 = 0.0;
};

// Linear interpolation between the closest ranks (numpy's default); zeros when empty.
inline Percentiles percentiles_ms(std::vector<double> seconds) {
  if (seconds.empty()) return {};
  std::sort(seconds.begin(), seconds.end());
  auto at = [&](double q) {
    const double rank = q * double(seconds.size() - 1);
    const size_t lo = size_t(rank);
    const size_t hi = std::min(lo + 1, seconds.size() - 1);
    return 1e3 * (seconds[lo] + (rank - double(lo)) * (seconds[hi] - seconds[lo]));
  };
  return {at(0.50), at(0.90), at(0.95), at(0.99)};
}

// KV cache pages in use, sampled while the run went on.
struct KvSamples {
  int64_t peak_pages = 0;
  int64_t total_pages = 0;
  double mean_utilization = 0.0;
};

// The prefix cache's tiers over a run (the engine's kv_* counters): counts are the run's own,
// the disk's contents and write backlog as it ended.
struct KvTiers {
  bool disk_on = false;
  int64_t ram_evictions = 0;
  int64_t disk_hit_tokens = 0, disk_read_bytes = 0, disk_written_bytes = 0;
  int64_t disk_writes_skipped = 0, disk_evictions = 0, disk_damaged = 0;
  int64_t disk_pages = 0, disk_bytes = 0, disk_write_backlog = 0;
};

// Worth a table: the disk tier was on, or the RAM pool gave cached pages away.
inline bool worth_showing(const KvTiers& t) {
  return t.disk_on || t.ram_evictions || t.disk_hit_tokens || t.disk_read_bytes || t.disk_written_bytes ||
         t.disk_writes_skipped || t.disk_evictions || t.disk_damaged || t.disk_pages || t.disk_write_backlog;
}

// The machine's 1-minute load average, or -1 when it cannot be read: figures taken under load
// are low for it, and a comparison's runs may have had different shares of the cores.
inline double load_average() {
  double load[1];
  return getloadavg(load, 1) == 1 ? load[0] : -1.0;
}

struct RunSummary {
  std::string mode;
  int64_t requests = 0;
  double duration_s = 0.0;
  int64_t prompt_tokens = 0, generated_tokens = 0;
  double tokens_per_s = 0.0, requests_per_s = 0.0;  // generated tokens a second
  double all_tokens_per_s = 0.0;                    // prompt and generated tokens a second
  Percentiles ttft_ms, tpot_ms, latency_ms;
  int64_t later_turns = 0;  // requests after a conversation's first turn: they can find it cached
  Percentiles later_turns_ttft_ms;
  KvSamples kv;
  int64_t preemptions = 0;
  std::vector<double> ttft_p50_by_turn_ms;  // one per conversation turn
  int64_t prefix_hit_tokens = 0;            // prompt tokens the engine took from its prefix cache
  int64_t prefix_queried_tokens = 0;        // prompt tokens it looked up there
  KvTiers kv_tiers;
  // Cores this process kept busy on average: well under the machine's count means other
  // processes took CPU time, and the run's figures are low for it.
  double cpu_cores = 0.0;
  double load_average = -1.0;  // as the run ended
  int64_t dropped = 0;         // requests the client disconnected from mid-stream on purpose
  int64_t failed = 0;          // requests that ended in an error (not in the figures above)
  std::string first_error;     // the first failure's message
};

inline RunSummary summarize(std::string mode, const std::vector<RequestRecord>& records, KvSamples kv, double cpu_s) {
  RunSummary s;
  s.mode = std::move(mode);
  s.requests = int64_t(records.size());
  std::vector<double> ttft, tpot, latency, later_turns_ttft;
  std::vector<std::vector<double>> ttft_by_turn;
  for (const RequestRecord& r : records) {
    if (size_t(r.turn) >= ttft_by_turn.size()) ttft_by_turn.resize(size_t(r.turn) + 1);
    ttft_by_turn[size_t(r.turn)].push_back(r.ttft_s);
    s.duration_s = std::max(s.duration_s, r.finished_s);
    s.prompt_tokens += r.prompt_tokens;
    s.generated_tokens += r.tokens;
    s.preemptions += r.preemptions;
    ttft.push_back(r.ttft_s);
    if (r.turn > 0) later_turns_ttft.push_back(r.ttft_s);
    latency.push_back(r.latency_s);
    if (r.tpot_s >= 0.0) tpot.push_back(r.tpot_s);
    s.dropped += r.dropped ? 1 : 0;
  }
  if (s.duration_s > 0.0) {
    s.tokens_per_s = double(s.generated_tokens) / s.duration_s;
    s.requests_per_s = double(s.requests) / s.duration_s;
    s.all_tokens_per_s = double(s.prompt_tokens + s.generated_tokens) / s.duration_s;
  }
  s.ttft_ms = percentiles_ms(std::move(ttft));
  s.later_turns = int64_t(later_turns_ttft.size());
  s.later_turns_ttft_ms = percentiles_ms(std::move(later_turns_ttft));
  for (auto& turn : ttft_by_turn) s.ttft_p50_by_turn_ms.push_back(percentiles_ms(std::move(turn)).p50);
  s.tpot_ms = percentiles_ms(std::move(tpot));
  s.latency_ms = percentiles_ms(std::move(latency));
  s.kv = kv;
  if (s.duration_s > 0.0) s.cpu_cores = cpu_s / s.duration_s;
  return s;
}

inline double prefix_hit_rate(const RunSummary& s) {
  return s.prefix_queried_tokens ? double(s.prefix_hit_tokens) / double(s.prefix_queried_tokens) : 0.0;
}

inline double peak_fraction(const KvSamples& kv) {
  return kv.total_pages ? double(kv.peak_pages) / double(kv.total_pages) : 0.0;
}

// Throughput per core actually had: comparable between runs that other processes slowed unevenly.
inline double tokens_per_cpu_s(const RunSummary& s) { return s.cpu_cores > 0.0 ? s.tokens_per_s / s.cpu_cores : 0.0; }

inline std::string format(const char* spec, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, value);
  return buf;
}

// A table of one metric a row, one run a column.
struct TableRow {
  const char* name;
  std::string (*cell)(const RunSummary&);
};

inline void print_rows(const std::vector<RunSummary>& runs, std::span<const TableRow> rows) {
  std::printf("%-20s", "");
  for (const RunSummary& s : runs) std::printf("%16s", s.mode.c_str());
  std::printf("\n");
  for (const TableRow& row : rows) {
    std::printf("%-20s", row.name);
    for (const RunSummary& s : runs) std::printf("%16s", row.cell(s).c_str());
    std::printf("\n");
  }
}

// The figures every run has.
inline void print_table(const std::vector<RunSummary>& runs) {
  static const TableRow rows[] = {
      {"requests", [](const RunSummary& s) { return std::to_string(s.requests); }},
      {"duration (s)", [](const RunSummary& s) { return format("%.2f", s.duration_s); }},
      {"prompt tokens", [](const RunSummary& s) { return std::to_string(s.prompt_tokens); }},
      {"generated tokens", [](const RunSummary& s) { return std::to_string(s.generated_tokens); }},
      {"throughput (tok/s)", [](const RunSummary& s) { return format("%.1f", s.tokens_per_s); }},
      {"throughput (req/s)", [](const RunSummary& s) { return format("%.3f", s.requests_per_s); }},
      {"prompt+gen (tok/s)", [](const RunSummary& s) { return format("%.1f", s.all_tokens_per_s); }},
      {"TTFT p50 (ms)", [](const RunSummary& s) { return format("%.1f", s.ttft_ms.p50); }},
      {"TTFT p90 (ms)", [](const RunSummary& s) { return format("%.1f", s.ttft_ms.p90); }},
      {"TTFT p95 (ms)", [](const RunSummary& s) { return format("%.1f", s.ttft_ms.p95); }},
      {"TTFT p99 (ms)", [](const RunSummary& s) { return format("%.1f", s.ttft_ms.p99); }},
      {"TPOT p50 (ms)", [](const RunSummary& s) { return format("%.2f", s.tpot_ms.p50); }},
      {"TPOT p90 (ms)", [](const RunSummary& s) { return format("%.2f", s.tpot_ms.p90); }},
      {"TPOT p99 (ms)", [](const RunSummary& s) { return format("%.2f", s.tpot_ms.p99); }},
      {"latency p50 (ms)", [](const RunSummary& s) { return format("%.1f", s.latency_ms.p50); }},
      {"latency p99 (ms)", [](const RunSummary& s) { return format("%.1f", s.latency_ms.p99); }},
      {"KV peak (pages)",
       [](const RunSummary& s) { return std::to_string(s.kv.peak_pages) + "/" + std::to_string(s.kv.total_pages); }},
      {"KV peak (%)", [](const RunSummary& s) { return format("%.1f", 100.0 * peak_fraction(s.kv)); }},
      {"KV mean (%)", [](const RunSummary& s) { return format("%.1f", 100.0 * s.kv.mean_utilization); }},
      {"preemptions", [](const RunSummary& s) { return std::to_string(s.preemptions); }},
      {"dropped", [](const RunSummary& s) { return std::to_string(s.dropped); }},
      {"failed", [](const RunSummary& s) { return std::to_string(s.failed); }},
      {"prefix hit (%)", [](const RunSummary& s) { return format("%.1f", 100.0 * prefix_hit_rate(s)); }},
      {"prefix hit tokens", [](const RunSummary& s) { return std::to_string(s.prefix_hit_tokens); }},
      {"CPU use (cores)", [](const RunSummary& s) { return format("%.2f", s.cpu_cores); }},
      {"tok per CPU-second", [](const RunSummary& s) { return format("%.1f", tokens_per_cpu_s(s)); }},
      {"load average (end)", [](const RunSummary& s) { return format("%.2f", s.load_average); }},
  };
  print_rows(runs, rows);
}

inline nlohmann::json to_json(const Percentiles& p) {
  return {{"p50", p.p50}, {"p90", p.p90}, {"p95", p.p95}, {"p99", p.p99}};
}

inline nlohmann::json to_json(const KvTiers& t) {
  return {{"disk_on", t.disk_on},
          {"ram_evictions", t.ram_evictions},
          {"disk_hit_tokens", t.disk_hit_tokens},
          {"disk_read_bytes", t.disk_read_bytes},
          {"disk_written_bytes", t.disk_written_bytes},
          {"disk_writes_skipped", t.disk_writes_skipped},
          {"disk_evictions", t.disk_evictions},
          {"disk_damaged", t.disk_damaged},
          {"disk_pages", t.disk_pages},
          {"disk_bytes", t.disk_bytes},
          {"disk_write_backlog", t.disk_write_backlog}};
}

inline nlohmann::json to_json(const RunSummary& s) {
  return {{"requests", s.requests},
          {"dropped", s.dropped},
          {"failed", s.failed},
          {"duration_s", s.duration_s},
          {"prompt_tokens", s.prompt_tokens},
          {"generated_tokens", s.generated_tokens},
          {"tokens_per_s", s.tokens_per_s},
          {"requests_per_s", s.requests_per_s},
          {"all_tokens_per_s", s.all_tokens_per_s},
          {"ttft_ms", to_json(s.ttft_ms)},
          {"later_turns", {{"requests", s.later_turns}, {"ttft_ms", to_json(s.later_turns_ttft_ms)}}},
          {"tpot_ms", to_json(s.tpot_ms)},
          {"latency_ms", to_json(s.latency_ms)},
          {"kv",
           {{"peak_pages", s.kv.peak_pages},
            {"total_pages", s.kv.total_pages},
            {"peak_utilization", peak_fraction(s.kv)},
            {"mean_utilization", s.kv.mean_utilization}}},
          {"preemptions", s.preemptions},
          {"ttft_p50_by_turn_ms", s.ttft_p50_by_turn_ms},
          {"prefix_hit_tokens", s.prefix_hit_tokens},
          {"prefix_queried_tokens", s.prefix_queried_tokens},
          {"prefix_hit_rate", prefix_hit_rate(s)},
          {"kv_tiers", to_json(s.kv_tiers)},
          {"load_average", s.load_average},
          {"cpu_cores", s.cpu_cores},
          {"tokens_per_cpu_s", tokens_per_cpu_s(s)}};
}

// The comparisons `--mode both` (continuous over static) and `--prefix-cache both` (cache on
// over off) exist for.
struct Ratio {
  double throughput = 0.0;            // tokens/s over the baseline's
  double ttft_p50 = 0.0;              // the baseline's TTFT p50 over this one's: how many times lower
  double later_turns_ttft_p50 = 0.0;  // the same for turns after the first; 0 without
  const RunSummary* run;
  const RunSummary* baseline;
};

inline Ratio compare(const RunSummary& run, const RunSummary& baseline) {
  const auto lower = [](double baseline_ms, double run_ms) { return run_ms > 0.0 ? baseline_ms / run_ms : 0.0; };
  return {baseline.tokens_per_s > 0.0 ? run.tokens_per_s / baseline.tokens_per_s : 0.0,
          lower(baseline.ttft_ms.p50, run.ttft_ms.p50),
          lower(baseline.later_turns_ttft_ms.p50, run.later_turns_ttft_ms.p50), &run, &baseline};
}

inline void print_ratio(const Ratio& r, const char* name, const char* baseline) {
  std::printf("\n%s/%s throughput: %.2fx; TTFT p50 %.2fx lower\n", name, baseline, r.throughput, r.ttft_p50);
  std::printf("TTFT p50: %s %.1f ms, %s %.1f ms\n", name, r.run->ttft_ms.p50, baseline, r.baseline->ttft_ms.p50);
  std::printf("TTFT p99: %s %.1f ms, %s %.1f ms\n", name, r.run->ttft_ms.p99, baseline, r.baseline->ttft_ms.p99);
  if (r.later_turns_ttft_p50 > 0.0) {
    std::printf("turns >= 2, TTFT p50: %s %.1f ms, %s %.1f ms: %.2fx lower\n", name, r.run->later_turns_ttft_ms.p50,
                baseline, r.baseline->later_turns_ttft_ms.p50, r.later_turns_ttft_p50);
  }
}

// TTFT p50 of each conversation turn, one run a line, and the last turn's over the first's.
inline void print_turns(const std::vector<RunSummary>& runs) {
  std::printf("\nTTFT p50 by turn (ms)\n");
  for (const RunSummary& s : runs) {
    if (s.ttft_p50_by_turn_ms.empty()) continue;
    std::printf("%-20s", s.mode.c_str());
    for (double t : s.ttft_p50_by_turn_ms) std::printf(" %8.1f", t);
    const double first = s.ttft_p50_by_turn_ms.front(), last = s.ttft_p50_by_turn_ms.back();
    std::printf("   last/first %.2fx\n", first > 0.0 ? last / first : 0.0);
  }
}

// TTFT of the turns after each conversation's first: those the prefix cache can answer.
inline void print_later_turns(const std::vector<RunSummary>& runs) {
  static const TableRow rows[] = {
      {"requests", [](const RunSummary& s) { return std::to_string(s.later_turns); }},
      {"TTFT p50 (ms)", [](const RunSummary& s) { return format("%.1f", s.later_turns_ttft_ms.p50); }},
      {"TTFT p95 (ms)", [](const RunSummary& s) { return format("%.1f", s.later_turns_ttft_ms.p95); }},
      {"TTFT p99 (ms)", [](const RunSummary& s) { return format("%.1f", s.later_turns_ttft_ms.p99); }},
  };
  std::printf("\nturns >= 2\n");
  print_rows(runs, rows);
}

// The prefix cache's tiers, when a run had a disk tier or evicted cached pages from RAM.
inline void print_kv_tiers(const std::vector<RunSummary>& runs) {
  if (std::none_of(runs.begin(), runs.end(), [](const RunSummary& s) { return worth_showing(s.kv_tiers); })) return;
  constexpr double kMiB = 1024.0 * 1024.0;
  static const TableRow rows[] = {
      {"disk tier", [](const RunSummary& s) { return std::string(s.kv_tiers.disk_on ? "on" : "off"); }},
      {"RAM evictions", [](const RunSummary& s) { return std::to_string(s.kv_tiers.ram_evictions); }},
      {"disk hit tokens", [](const RunSummary& s) { return std::to_string(s.kv_tiers.disk_hit_tokens); }},
      {"disk read (MiB)",
       [](const RunSummary& s) { return format("%.1f", double(s.kv_tiers.disk_read_bytes) / kMiB); }},
      {"disk written (MiB)",
       [](const RunSummary& s) { return format("%.1f", double(s.kv_tiers.disk_written_bytes) / kMiB); }},
      {"writes skipped", [](const RunSummary& s) { return std::to_string(s.kv_tiers.disk_writes_skipped); }},
      {"disk evictions", [](const RunSummary& s) { return std::to_string(s.kv_tiers.disk_evictions); }},
      {"damaged files", [](const RunSummary& s) { return std::to_string(s.kv_tiers.disk_damaged); }},
      {"disk pages (end)", [](const RunSummary& s) { return std::to_string(s.kv_tiers.disk_pages); }},
      {"disk MiB (end)", [](const RunSummary& s) { return format("%.1f", double(s.kv_tiers.disk_bytes) / kMiB); }},
      {"write backlog (end)", [](const RunSummary& s) { return std::to_string(s.kv_tiers.disk_write_backlog); }},
  };
  std::printf("\nprefix cache tiers\n");
  print_rows(runs, rows);
}

inline nlohmann::json to_json(const Ratio& r) {
  return {{"throughput", r.throughput},
          {"ttft_p50_lower", r.ttft_p50},
          {"later_turns_ttft_p50_lower", r.later_turns_ttft_p50},
          {"ttft_p50_ms", {{r.run->mode, r.run->ttft_ms.p50}, {r.baseline->mode, r.baseline->ttft_ms.p50}}},
          {"ttft_p99_ms", {{r.run->mode, r.run->ttft_ms.p99}, {r.baseline->mode, r.baseline->ttft_ms.p99}}}};
}

}  // namespace pagoda::loadgen
