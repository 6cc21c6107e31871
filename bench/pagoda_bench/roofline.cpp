#include "bench/pagoda_bench/roofline.h"

namespace pagoda::benchtool {

namespace {

// Bytes one generated token costs when `n_seqs` sequences decode together: the step's weights
// shared among them, and each one's keys and values. Decode step j (1..n) of a sequence whose
// prompt ends at position L attends to L + j positions: L + (n + 1) / 2 on average.
double bytes_per_token(const TestSpec& spec, const ModelFacts& model, KvCacheType cache_type) {
  const double prompt_end = spec.n_depth + spec.fresh_prompt();
  const double positions = prompt_end + (spec.n_gen + 1) / 2.0;
  return double(model.decode_bytes) / spec.n_seqs + model.kv_bytes_per_position(cache_type) * positions;
}

// Flops of one prompt token: its matrix products, and attention over the positions before it
// (the token at position q attends to q + 1; the prompt sits after the depth context).
double flops_per_prompt_token(const TestSpec& spec, const ModelFacts& model) {
  const double positions = spec.n_depth + (spec.n_prompt + 1) / 2.0;
  return 2.0 * double(model.matrix_params) + model.attention_flops(positions);
}

}  // namespace

Roofline roofline(const TestResult& result, const ModelFacts& model, KvCacheType cache_type, int threads,
                  const Machine& machine) {
  const TestSpec& spec = result.spec;
  const bool batched = spec.kind == TestKind::Batched;
  Roofline r;
  if (spec.n_gen > 0) {
    const double rate = batched ? mean(result.samples_s_tg) : result.avg_ts();
    r.bandwidth_gbs = result.read_bytes_per_s * 1e-9;
    r.roofline_ts = result.read_bytes_per_s / bytes_per_token(spec, model, cache_type);
    r.roofline_fraction = rate / *r.roofline_ts;
  }
  if (spec.n_prompt > 0) {
    const double rate = batched ? mean(result.samples_s_pp) : result.avg_ts();
    r.peak_gflops = machine.fma_flops_for(threads) * 1e-9;
    r.gflops = rate * flops_per_prompt_token(spec, model) * 1e-9;
    r.peak_fraction = *r.gflops / *r.peak_gflops;
  }
  return r;
}

}  // namespace pagoda::benchtool
