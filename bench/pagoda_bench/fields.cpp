#include "bench/pagoda_bench/fields.h"

#include <cmath>

#include "build_info.h"  // generated at every build by bench/pagoda_bench/build_info.cmake

namespace pagoda::benchtool {

std::string build_commit() { return PAGODA_BUILD_COMMIT; }
int build_number() { return PAGODA_BUILD_NUMBER; }

namespace {

using Kind = Field::Kind;

Field text(const char* name, std::string value) { return {name, Kind::String, std::move(value)}; }
Field flag(const char* name, bool value) { return {name, Kind::Bool, std::to_string(value)}; }
Field integer(const char* name, int64_t value) { return {name, Kind::Int, std::to_string(value)}; }
Field real(const char* name, double value) { return {name, Kind::Float, std::to_string(value)}; }
Field real(const char* name, std::optional<double> value) {
  return {name, Kind::Float, value ? std::optional(std::to_string(*value)) : std::nullopt};
}

// llama-bench's fields. Those that mean nothing on pagoda (GPUs, thread pinning, polling)
// say what pagoda does: no GPU, no affinity mask, threads that block rather than poll.
std::vector<Field> llama_fields(const Row& row) {
  const Instance& in = row.instance;
  const TestResult& r = row.result;
  const char* cache_type = kv_cache_type_name(in.cache_type);
  return {text("build_commit", build_commit()),
          integer("build_number", build_number()),
          text("cpu_info", row.machine.cpu_info),
          text("gpu_info", ""),
          text("backends", "CPU"),
          text("model_filename", in.model),
          text("model_type", row.model.type),
          integer("model_size", int64_t(row.model.size_bytes)),
          integer("model_n_params", int64_t(row.model.n_params)),
          integer("n_batch", in.n_batch),
          integer("n_ubatch", in.n_ubatch),
          integer("n_threads", in.threads),
          text("cpu_mask", "0x0"),
          flag("cpu_strict", false),
          integer("poll", 0),
          text("type_k", cache_type),
          text("type_v", cache_type),
          integer("n_gpu_layers", 0),
          text("split_mode", "none"),
          integer("main_gpu", 0),
          flag("no_kv_offload", false),
          flag("flash_attn", false),
          text("tensor_split", "0.00"),
          flag("use_mmap", in.use_mmap),
          flag("embeddings", false),
          integer("n_prompt", r.spec.n_prompt),
          integer("n_gen", r.spec.n_gen),
          integer("n_depth", r.spec.n_depth),
          text("test_time", r.test_time),
          integer("avg_ns", std::llround(r.avg_ns())),
          integer("stddev_ns", std::llround(r.stddev_ns())),
          real("avg_ts", r.avg_ts()),
          real("stddev_ts", r.stddev_ts())};
}

std::optional<double> batched_mean(const TestResult& r, const std::vector<double>& samples) {
  if (r.spec.kind != TestKind::Batched) return std::nullopt;
  return mean(samples);
}

std::vector<Field> pagoda_fields(const Row& row) {
  const TestResult& r = row.result;
  const Roofline& roof = row.roofline;
  return {integer("n_seqs", r.spec.n_seqs),
          real("s_pp", batched_mean(r, r.samples_s_pp)),
          real("s_tg", batched_mean(r, r.samples_s_tg)),
          real("bandwidth_gbs", roof.bandwidth_gbs),
          real("roofline_ts", roof.roofline_ts),
          real("roofline_fraction", roof.roofline_fraction),
          real("peak_gflops", roof.peak_gflops),
          real("gflops", roof.gflops),
          real("peak_fraction", roof.peak_fraction)};
}

}  // namespace

std::vector<Field> fields(const Row& row) {
  std::vector<Field> out = llama_fields(row);
  for (Field& f : pagoda_fields(row)) out.push_back(std::move(f));
  return out;
}

}  // namespace pagoda::benchtool
