// Multi-LoRA serving through the Engine: adapters loaded and unloaded at run time, requests
// on many adapters and the base model at once, residency limits with LRU swaps, bad files.

#include <gtest/gtest.h>

#include <fstream>
#include <latch>

#include "engine/lora/lora_adapter.h"
#include "testing/lora_synth.h"
#include "testing/reference_model.h"
#include "engine/sampling/sampler.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/lora_support.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using test::await;

using namespace std::chrono_literals;

// Adapter files for the tiny test model, written once per program: f32, f16 and bf16 ones
// (16-bit adapters stay 16-bit in the kernels).
const std::string& adapter_file(int i) {
  static std::vector<std::string> paths = [] {
    std::vector<std::string> p;
    for (int k = 0; k < 8; ++k) {
      LoraSynthSpec spec;
      spec.rank = 2 + 2 * (k % 3);
      spec.alpha = float(spec.rank) * 2.0f;
      spec.seed = uint64_t(50 + k);
      spec.type = k % 4 == 1 ? GgmlType::F16 : k % 4 == 3 ? GgmlType::BF16 : GgmlType::F32;
      p.push_back(test::scratch_path("adapter" + std::to_string(k) + ".gguf"));
      write_synth_lora(p.back(), test::tiny_gqa_config(), spec);
    }
    return p;
  }();
  return paths[size_t(i)];
}

Request greedy(const std::string& adapter, int32_t n = 24) {
  Request r;
  r.prompt = "Once upon a time, " + adapter;
  r.adapter = adapter;
  r.sampling.temperature = 0.0f;
  r.max_new_tokens = n;
  r.ignore_eos = true;
  return r;
}

// Greedy ids of `r` from the oracle on merged weights (or the base, without an adapter).
std::vector<int32_t> oracle_greedy(const Model& base, const Request& r, const std::string& adapter_path, float scale) {
  const Model m = adapter_path.empty() ? base : test::merged(base, load_lora_adapter(adapter_path, base.config, scale));
  ReferenceModel oracle(m);
  std::vector<int32_t> tokens = m.tokenizer.encode(r.prompt, true);
  const size_t prompt_len = tokens.size();
  for (size_t pos = 0; tokens.size() < prompt_len + size_t(r.max_new_tokens); ++pos) {
    const auto& logits = oracle.forward(tokens[pos], int32_t(pos));
    if (pos + 1 >= tokens.size()) tokens.push_back(argmax(logits));
  }
  return {tokens.begin() + ptrdiff_t(prompt_len), tokens.end()};
}

struct EngineLora : ::testing::Test {
  Model base = load_model(test::tiny_gqa_model());
};

// Eight adapters and the base, 36 requests at once: each output equals the merged-weight
// oracle's, whether adapters mix in one step or take turns, with all eight resident or two.
TEST_F(EngineLora, ManyAdaptersAtOnceMatchTheOracle) {
  std::map<std::string, std::vector<int32_t>> want;
  want[""] = oracle_greedy(base, greedy(""), "", 1.0f);
  for (int k = 0; k < 8; ++k) {
    const std::string name = "a" + std::to_string(k);
    want[name] = oracle_greedy(base, greedy(name), adapter_file(k), k == 3 ? 0.5f : 1.0f);
  }
  for (bool mixed : {true, false}) {
    for (int32_t resident : {8, 2}) {
      SCOPED_TRACE(std::string(mixed ? "mixed" : "coalesce-only") + ", resident " + std::to_string(resident));
      // The oracle keeps K and V in f32, so the engine does too (f16 KV would part at near-ties).
      Engine engine({.model_path = test::tiny_gqa_model(),
                     .threads = 2,
                     .kv_cache_type = KvCacheType::F32,
                     .max_resident_adapters = resident,
                     .adapter_run_cap = 3,
                     .mixed_adapter_batches = mixed});
      for (int k = 0; k < 8; ++k) engine.load_adapter("a" + std::to_string(k), adapter_file(k), k == 3 ? 0.5f : 1.0f);
      std::vector<std::pair<std::string, RequestHandle>> handles;
      for (int i = 0; i < 36; ++i) {
        const std::string name = i % 9 == 8 ? "" : "a" + std::to_string((i * 5) % 8);
        handles.emplace_back(name, engine.submit(greedy(name)));
      }
      for (auto& [name, h] : handles) EXPECT_EQ(await(h).token_ids, want[name]) << "adapter '" << name << "'";
      const EngineMetrics m = engine.metrics();
      EXPECT_LE(m.adapters_resident, resident);
      if (resident == 2) {
        EXPECT_GT(m.adapter_swaps, 8) << "two slots for eight adapters means swaps";
      }
    }
  }
}

TEST_F(EngineLora, BadAdapterFilesAreRefusedAndTheEngineKeepsServing) {
  Engine engine({.model_path = test::tiny_gqa_model(), .threads = 1});
  auto refused = [&](const std::string& path, const std::string& phrase) {
    try {
      engine.load_adapter("bad", path);
      ADD_FAILURE() << path << " loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    }
  };
  refused(test::scratch_path("no-such-adapter.gguf"), "no-such-adapter");
  refused(test::tiny_gqa_model(), "adapter");  // a base model is not an adapter
  // An adapter for another shape of model.
  ModelConfig other = test::tiny_gqa_config();
  other.dim = 32;
  other.n_heads = 4;
  other.n_kv_heads = 2;
  const std::string wrong_shape = test::scratch_path("wrong-shape-adapter.gguf");
  write_synth_lora(wrong_shape, other, LoraSynthSpec{});
  refused(wrong_shape, "shape");

  engine.load_adapter("good", adapter_file(0));
  EXPECT_THROW(engine.load_adapter("good", adapter_file(1)), Error) << "the name is taken";
  RequestHandle h = engine.submit(greedy("good", 5));
  EXPECT_EQ(await(h).token_ids.size(), 5u);
  EXPECT_THROW(engine.unload_adapter("never-loaded"), Error);
}

// Unloading: requests already running finish on the adapter; requests still waiting for a
// slot fail with an error naming it; later requests see an unknown adapter.
TEST_F(EngineLora, UnloadWhileRequestsRunAndWait) {
  Engine engine({.model_path = test::tiny_gqa_model(), .threads = 2, .max_resident_adapters = 1});
  engine.load_adapter("a0", adapter_file(0));
  engine.load_adapter("a1", adapter_file(1));
  std::latch go(1);
  Request running = greedy("a0", 30);
  std::atomic<int> tokens{0};
  std::latch first_token(1);
  running.on_token = [&](const StreamEvent&) {
    if (++tokens == 1) {
      first_token.count_down();
      go.wait();
    }
  };
  RequestHandle r = engine.submit(running);
  first_token.wait();
  // a0 holds the one slot and is in use, so a1's request waits in the router.
  RequestHandle waiting = engine.submit(greedy("a1"));
  engine.unload_adapter("a1");
  const Completion cw = await(waiting);
  EXPECT_EQ(cw.finish_reason, FinishReason::Error);
  EXPECT_NE(cw.error.find("a1"), std::string::npos) << cw.error;

  engine.unload_adapter("a0");  // while its request runs
  go.count_down();
  const Completion cr = await(r);
  EXPECT_EQ(cr.finish_reason, FinishReason::Length);
  EXPECT_EQ(cr.token_ids, oracle_greedy(base, greedy("a0", 30), adapter_file(0), 1.0f));

  RequestHandle late = engine.submit(greedy("a0"));
  EXPECT_EQ(await(late).finish_reason, FinishReason::Error);
  engine.load_adapter("a0", adapter_file(0));  // and back again
  RequestHandle again = engine.submit(greedy("a0", 30));
  EXPECT_EQ(await(again).token_ids, cr.token_ids);
}

}  // namespace
}  // namespace pagoda
