// Where a single-stream decode step of a real-size model goes: each projection kind over all
// layers at one activation row (Q/K/V, attention output, gate/up, down), the classifier,
// sampling over the vocabulary, and the whole forward step at a context depth — each as time
// per token and as GB/s against the read bandwidth measured in the same process, so the gap
// between the step and the sum of its matrices is the work that leaves memory idle.
//
//   PAGODA_BENCH_MODEL=llama-3.2-1b-q4_k_m.gguf build/release/bench/bench_decode_profile
//
// (pagoda-synth --preset llama-3.2-1b --type q4_k_m writes such a file.) PAGODA_BENCH_THREADS
// sets the threads (default: all cores). Without PAGODA_BENCH_MODEL every benchmark skips.

#include <benchmark/benchmark.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/read_bandwidth.h"
#include "engine/forward/model_runner.h"
#include "engine/gguf/ggml_types.h"
#include "engine/kv/block_table.h"
#include "engine/kv/page_pool.h"
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"
#include "kernels/attention.h"
#include "kernels/quant/weight_matrix.h"

namespace {

using namespace pagoda;

constexpr int32_t kTokensPerPage = 16;

int threads() {
  const char* t = std::getenv("PAGODA_BENCH_THREADS");
  return t ? std::atoi(t) : tbb::info::default_concurrency();
}

// The model under test, loaded once, and (for the per-kind benchmarks) its matrices packed
// again kind by kind as ModelRunner packs them.
struct Profiled {
  Model model;
  ModelRunner runner;
  tbb::task_arena arena;
  struct Kind {
    std::string name;
    std::deque<kernels::WeightMatrix> matrices;  // one per layer of this kind (stable addresses)
    double bytes = 0;
  };
  std::deque<Kind> kinds;
  // Each layer's matrices (then the classifier) in the order a step runs them.
  std::vector<std::vector<const kernels::WeightMatrix*>> layer_matrices;

  explicit Profiled(const std::string& path) : model(load_model(path)), runner(model, threads()), arena(threads()) {}

  // The per-kind copies of the matrices, made on first use (the whole-step benchmarks need only
  // the runner, so a model as large as memory can still be stepped). Dense models only.
  void build_kinds() {
    if (!kinds.empty()) return;
    auto matrix = [](std::initializer_list<const WeightTensor*> parts) {
      std::vector<kernels::WeightPart> views;
      for (const WeightTensor* p : parts) views.push_back({p->type, p->data, int(p->rows)});
      return kernels::WeightMatrix::make(views, int((*parts.begin())->cols));
    };
    // Kinds by projection and storage type: a Q4_K_M file keeps some layers' ffn_down and
    // attn_v in Q6_K, and the classifier in Q6_K.
    auto add = [&](const std::string& projection, std::initializer_list<const WeightTensor*> parts) {
      std::string name = projection;
      for (const WeightTensor* t : parts) {
        const std::string type = ggml_type_name(t->type);
        if (name.find(type) == std::string::npos) name += " " + type;
      }
      auto it = std::find_if(kinds.begin(), kinds.end(), [&](const Kind& k) { return k.name == name; });
      Kind& k = it != kinds.end() ? *it : kinds.emplace_back();
      k.name = name;
      for (const WeightTensor* p : parts) k.bytes += double(p->n_bytes());
      k.matrices.push_back(matrix(parts));
      layer_matrices.back().push_back(&k.matrices.back());
    };
    arena.execute([&] {
      for (const LayerWeights& w : model.weights.layers) {
        layer_matrices.emplace_back();
        add("qkv", {&w.attn_q, &w.attn_k, &w.attn_v});
        add("attn_output", {&w.attn_output});
        add("gate_up", {&w.ffn_gate, &w.ffn_up});
        add("down", {&w.ffn_down});
      }
      layer_matrices.emplace_back();
      add("classifier", {&model.weights.output});
    });
  }

  double weight_bytes() const {
    double total = 0;
    for (const Kind& k : kinds) total += k.bytes;
    return total;
  }
};

Profiled* profiled(benchmark::State& state) {
  static const char* path = std::getenv("PAGODA_BENCH_MODEL");
  static std::unique_ptr<Profiled> p = path ? std::make_unique<Profiled>(path) : nullptr;
  if (!p) state.SkipWithError("set PAGODA_BENCH_MODEL to a GGUF file to profile");
  return p.get();
}

// The model with its per-kind matrices; null (the benchmark skipped) without a model or for a
// mixture of experts.
Profiled* profiled_kinds(benchmark::State& state) {
  Profiled* p = profiled(state);
  if (p && p->model.config.has_experts()) {
    state.SkipWithError("per-kind matrices are for dense models");
    return nullptr;
  }
  if (p) p->build_kinds();
  return p;
}

void bandwidth_counters(benchmark::State& state, double bytes_per_iteration) {
  const double bytes = bytes_per_iteration * double(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsRate);
  state.counters["of_read_bw"] = benchmark::Counter(bytes / bench::read_bandwidth(), benchmark::Counter::kIsRate);
  state.counters["MB"] = bytes_per_iteration * 1e-6;
}

void BM_ReadBandwidth(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(bench::read_bandwidth());
  state.counters["GB/s"] = bench::read_bandwidth() * 1e-9;
}

// One kind of projection, every layer's in turn, at M = 1: what a decode step spends on it.
void BM_Projection(benchmark::State& state) {
  Profiled* p = profiled_kinds(state);
  if (!p) return;
  if (size_t(state.range(0)) >= p->kinds.size()) {
    state.SkipWithError("the model has fewer kinds of matrix");
    return;
  }
  const Profiled::Kind& kind = p->kinds[state.range(0)];
  state.SetLabel(kind.name);
  std::vector<float> a(size_t(p->model.config.ffn_dim) + p->model.config.q_dim(), 0.01f), c;
  for (const kernels::WeightMatrix& m : kind.matrices) c.resize(std::max(c.size(), size_t(m.rows())));
  for (auto _ : state) {
    p->arena.execute([&] {
      for (const kernels::WeightMatrix& m : kind.matrices)
        kernels::matmul(a.data(), 1, m.cols(), m, c.data(), m.rows());
    });
    benchmark::DoNotOptimize(c.data());
  }
  bandwidth_counters(state, kind.bytes);
}

// Every weight matrix of a token back to back: the step's matrices with nothing between them.
void BM_AllMatrices(benchmark::State& state) {
  Profiled* p = profiled_kinds(state);
  if (!p) return;
  std::vector<float> a(size_t(p->model.config.ffn_dim) + p->model.config.q_dim(), 0.01f), c(p->model.config.vocab_size);
  for (auto _ : state) {
    p->arena.execute([&] {
      for (const auto& layer : p->layer_matrices)
        for (const kernels::WeightMatrix* m : layer) kernels::matmul(a.data(), 1, m->cols(), *m, c.data(), m->rows());
    });
    benchmark::DoNotOptimize(c.data());
  }
  bandwidth_counters(state, p->weight_bytes());
}

// Every weight matrix at M = range(0) activation rows: what verifying a speculation of M − 1
// guesses (or a step of M sequences) spends on weights. Bandwidth-bound, it costs what M = 1
// does; the rows beyond the first are the kernel's compute.
void BM_AllMatricesRows(benchmark::State& state) {
  Profiled* p = profiled_kinds(state);
  if (!p) return;
  const int rows = int(state.range(0));
  const size_t width =
      std::max<size_t>(size_t(p->model.config.ffn_dim) + p->model.config.q_dim(), p->model.config.vocab_size);
  std::vector<float> a(width * rows, 0.01f), c(width * rows);
  for (auto _ : state) {
    p->arena.execute([&] {
      for (const auto& layer : p->layer_matrices)
        for (const kernels::WeightMatrix* m : layer)
          kernels::matmul(a.data(), rows, m->cols(), *m, c.data(), m->rows());
    });
    benchmark::DoNotOptimize(c.data());
  }
  bandwidth_counters(state, p->weight_bytes());
  state.counters["rows/s"] = benchmark::Counter(double(state.iterations()) * rows, benchmark::Counter::kIsRate);
}

// The whole forward step of one sequence with range(0) positions already cached: weights plus
// that context's K/V (f16) streamed per token.
void BM_Step(benchmark::State& state) {
  Profiled* p = profiled(state);
  if (!p) return;
  const int32_t depth = int32_t(state.range(0));
  const ModelConfig& c = p->model.config;
  const KvLayout layout = KvLayout::for_model(c, kTokensPerPage, KvCacheType::F16);
  PagePool pool(layout, (depth + 1 + kTokensPerPage - 1) / kTokensPerPage * layout.n_groups(), true);
  BlockTable table(layout);
  table.reserve(depth + 1, pool);
  const std::vector<int32_t> token{42};
  Batch batch;
  batch.entries.push_back({token, depth, &table, true});
  std::vector<float> logits;
  p->runner.forward(batch, pool.view(), logits);
  for (auto _ : state) {
    p->runner.forward(batch, pool.view(), logits);
    benchmark::DoNotOptimize(logits.data());
  }
  const double kv_bytes = double(depth) * c.n_layers * 2.0 * c.kv_dim() * 2.0;
  bandwidth_counters(state, p->runner.last_step_weight_bytes() + kv_bytes);
  state.counters["tok/s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}

// A decode step of range(0) sequences, each with 64 positions cached: tokens/s against the
// roofline of the weight bytes the step actually read (ModelRunner::last_step_weight_bytes:
// for a mixture of experts, the experts the batch's rows chose, each once) plus the K/V.
void BM_StepBatch(benchmark::State& state) {
  Profiled* p = profiled(state);
  if (!p) return;
  constexpr int32_t kDepth = 64;
  const int32_t batch_size = int32_t(state.range(0));
  const ModelConfig& c = p->model.config;
  const KvLayout layout = KvLayout::for_model(c, kTokensPerPage, KvCacheType::F16);
  PagePool pool(layout, batch_size * layout.n_groups() * ((kDepth + kTokensPerPage) / kTokensPerPage), true);
  std::vector<BlockTable> tables(size_t(batch_size), BlockTable{layout});
  std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(batch_size));
  Batch batch;
  std::mt19937 rng(5);
  for (int32_t b = 0; b < batch_size; ++b) {
    tables[size_t(b)].reserve(kDepth + 1, pool);
    tokens[size_t(b)] = {int32_t(rng() % uint32_t(c.vocab_size))};
    batch.entries.push_back({tokens[size_t(b)], kDepth, &tables[size_t(b)], true});
  }
  std::vector<float> logits;
  p->runner.forward(batch, pool.view(), logits);
  double weight_bytes = 0.0;
  for (auto _ : state) {
    p->runner.forward(batch, pool.view(), logits);
    weight_bytes += p->runner.last_step_weight_bytes();
    benchmark::DoNotOptimize(logits.data());
    // Each sequence's next token is its own greedy pick, so the rows route as a generation's would.
    for (int32_t b = 0; b < batch_size; ++b) {
      const float* row = logits.data() + size_t(b) * c.vocab_size;
      tokens[size_t(b)][0] = int32_t(std::max_element(row, row + c.vocab_size) - row);
    }
  }
  const double steps = double(state.iterations());
  const double kv_bytes = double(batch_size) * kDepth * c.n_layers * 2.0 * c.kv_dim() * 2.0;
  const double step_bytes = weight_bytes / steps + kv_bytes;
  state.counters["tok/s"] = benchmark::Counter(steps * batch_size, benchmark::Counter::kIsRate);
  state.counters["weight_MB/step"] = weight_bytes / steps * 1e-6;
  state.counters["roofline_tok/s"] = bench::read_bandwidth() / step_bytes * batch_size;
  state.counters["of_roofline"] =
      benchmark::Counter(step_bytes * steps / bench::read_bandwidth(), benchmark::Counter::kIsRate);
}

// Decode attention alone: one query token over range(0) cached positions (f16), every layer's
// KV heads in parallel as the runner runs them. range(1) = 1 reads one layer's K/V for every
// layer (it stays in L3 at 8k): the kernel's own ceiling beside the memory-bound pass.
void BM_Attention(benchmark::State& state) {
  Profiled* p = profiled(state);
  if (!p) return;
  const int32_t depth = int32_t(state.range(0));
  const bool one_layer = state.range(1) == 1;
  const ModelConfig& c = p->model.config;
  const KvLayout layout = KvLayout::for_model(c, kTokensPerPage, KvCacheType::F16);
  const int32_t n_pages = (depth + kTokensPerPage - 1) / kTokensPerPage;
  PagePool pool(layout, n_pages, true);
  BlockTable table(kTokensPerPage);
  table.reserve(depth, pool);
  const KvView kv = pool.view();
  std::vector<float> q(size_t(c.q_dim()), 0.1f), out(size_t(c.q_dim()));
  std::vector<std::vector<const std::byte*>> k_pages(size_t(c.n_layers) * c.n_kv_heads), v_pages(k_pages.size());
  for (int32_t l = 0; l < c.n_layers; ++l)
    for (int32_t h = 0; h < c.n_kv_heads; ++h)
      for (int32_t page : table.pages()) {
        k_pages[size_t(l) * c.n_kv_heads + h].push_back(kv.block(page, one_layer ? 0 : l, 0, h));
        v_pages[size_t(l) * c.n_kv_heads + h].push_back(kv.block(page, one_layer ? 0 : l, 1, h));
      }
  const int32_t group = c.group_size(), head_dim = c.head_dim();
  for (auto _ : state) {
    p->arena.execute([&] {
      for (int32_t l = 0; l < c.n_layers; ++l)
        tbb::parallel_for(0, c.n_kv_heads, [&](int32_t h) {
          const size_t at = size_t(l) * c.n_kv_heads + h;
          kernels::paged_attention(KvCacheType::F16, q.data() + size_t(h) * group * head_dim, group, head_dim, depth,
                                   k_pages[at].data(), v_pages[at].data(), kTokensPerPage, 0.125f,
                                   out.data() + size_t(h) * group * head_dim);
        });
    });
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(one_layer ? "one layer's K/V (in cache)" : "every layer's K/V");
  bandwidth_counters(state, double(depth) * c.n_layers * 2.0 * c.kv_dim() * 2.0);
}

// Picking a token from the vocabulary's logits: greedy (argmax), and llama.cpp's default chain
// (top-k 40, top-p 0.95, min-p 0.05, temperature 0.8).
void BM_Sample(benchmark::State& state) {
  Profiled* p = profiled(state);
  if (!p) return;
  std::vector<float> logits(p->model.config.vocab_size);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (float& x : logits) x = dist(rng);
  SamplingParams params;
  if (state.range(0) == 0) {
    params.temperature = 0;
  } else {
    params.temperature = 0.8f, params.top_k = 40, params.top_p = 0.95f, params.min_p = 0.05f, params.seed = 7;
  }
  state.SetLabel(state.range(0) == 0 ? "greedy" : "top-k 40, top-p 0.95, min-p 0.05, T 0.8");
  Sampler sampler(params);
  const std::vector<int32_t> history{1, 2, 3};
  for (auto _ : state) benchmark::DoNotOptimize(sampler.sample(logits, history));
}

BENCHMARK(BM_ReadBandwidth)->Iterations(1);
BENCHMARK(BM_Projection)->DenseRange(0, 7)->ArgName("kind")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllMatrices)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllMatricesRows)->ArgName("rows")->DenseRange(1, 9)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Step)->ArgName("depth")->Arg(1)->Arg(512)->Arg(8192)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StepBatch)->ArgName("seqs")->Arg(1)->Arg(4)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Attention)
    ->ArgNames({"depth", "one_layer"})
    ->ArgsProduct({{512, 8192}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Sample)->DenseRange(0, 1)->ArgName("sampling")->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
