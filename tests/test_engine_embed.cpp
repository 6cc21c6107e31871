// Embeddings through the Engine (Request::embedding, Engine::embed): the pooled final hidden
// state after the output norm equals the reference model's, pooled by each definition, on
// stories260K and a random-weight model; bit-identical alone, batched and under any prefill
// chunking or preemption; the GGUF's pooling_type is followed; bad input is refused clearly;
// cancel and shutdown resolve every future and return every page.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/bert_models.h"
#include "support/gguf_edit.h"
#include "support/test_support.h"
#include "testing/reference_model.h"

namespace pagoda {
namespace {

// The oracle's embedding: every position fed in order, its final normed hidden state pooled as
// `pooling` defines it (mean over all positions, the first's, the last's), then scaled to unit
// length when `normalize`.
std::vector<float> oracle_embedding(const std::string& path, const std::vector<int32_t>& ids, Pooling pooling,
                                    bool normalize) {
  const Model model = load_model(path);
  ReferenceModel ref(model);
  std::vector<double> pooled(size_t(model.config.dim), 0.0);
  for (int32_t pos = 0; pos < int32_t(ids.size()); ++pos) {
    ref.forward(ids[size_t(pos)], pos);
    const bool take = pooling == Pooling::Mean || (pooling == Pooling::Cls && pos == 0) ||
                      (pooling == Pooling::Last && pos + 1 == int32_t(ids.size()));
    if (!take) continue;
    for (size_t i = 0; i < pooled.size(); ++i) pooled[i] += ref.hidden()[i];
  }
  if (pooling == Pooling::Mean) {
    for (double& x : pooled) x /= double(ids.size());
  }
  double norm = 0.0;
  for (double x : pooled) norm += x * x;
  if (normalize) {
    for (double& x : pooled) x /= std::sqrt(norm);
  }
  return {pooled.begin(), pooled.end()};
}

double length(const std::vector<float>& v) {
  double s = 0.0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s);
}

Request embedding_request(const std::vector<int32_t>& ids, Pooling pooling, bool normalize = true) {
  Request r;
  r.prompt_ids = ids;
  r.embedding = EmbeddingParams{pooling, normalize};
  return r;
}

// A prompt of `n` ids from the golden cases' prompts, repeated (every id is a real token).
std::vector<int32_t> long_prompt(const std::vector<test::GoldenCase>& cases, size_t n) {
  std::vector<int32_t> ids;
  for (size_t i = 0; ids.size() < n; ++i) {
    const auto& p = cases[i % cases.size()].prompt_ids;
    for (size_t j = i == 0 ? 0 : 1; j < p.size() && ids.size() < n; ++j) ids.push_back(p[j]);
  }
  return ids;
}

class EngineEmbed : public test::StoriesTest {};

TEST_F(EngineEmbed, EachPoolingEqualsTheOraclesNormedHiddenStatesPooledByItsDefinition) {
  // F32 keys and values, as the oracle keeps them; prompts span several chunks.
  Engine engine({.model_path = model_, .threads = 2, .kv_cache_type = KvCacheType::F32, .prefill_chunk = 7});
  const std::vector<int32_t> ids = long_prompt(cases_, 40);
  for (Pooling pooling : {Pooling::Mean, Pooling::Cls, Pooling::Last}) {
    for (bool normalize : {true, false}) {
      const std::vector<float> got = engine.embed({ids}, {pooling, normalize}).at(0);
      const std::vector<float> want = oracle_embedding(model_, ids, pooling, normalize);
      ASSERT_EQ(got.size(), size_t(engine.embedding_size()));
      EXPECT_LT(test::relative_error(got, want), 1e-5) << pooling_name(pooling) << ", normalize " << normalize;
      if (normalize) {
        EXPECT_NEAR(length(got), 1.0, 1e-6);
      } else {
        EXPECT_GT(std::abs(length(got) - 1.0), 1e-3) << "a raw hidden state is not of unit length";
      }
    }
  }
  test::expect_engine_idle(engine);
}

TEST_F(EngineEmbed, PoolingNoneGivesEveryPositionsRowAsTheOracleDoesWhateverTheChunking) {
  const std::vector<int32_t> ids = long_prompt(cases_, 40);
  const Model model = load_model(model_);
  const auto dim = size_t(model.config.dim);
  std::vector<float> want;  // the oracle's rows, each normalized alone
  ReferenceModel ref(model);
  for (int32_t pos = 0; pos < int32_t(ids.size()); ++pos) {
    ref.forward(ids[size_t(pos)], pos);
    double norm = 0.0;
    for (float x : ref.hidden()) norm += double(x) * x;
    for (float x : ref.hidden()) want.push_back(float(x / std::sqrt(norm)));
  }
  std::vector<float> first;
  for (int32_t chunk : {1, 7, 64}) {
    Engine engine({.model_path = model_, .threads = 2, .kv_cache_type = KvCacheType::F32, .prefill_chunk = chunk});
    const std::vector<float> rows = engine.embed({ids}, {Pooling::None}).at(0);
    ASSERT_EQ(rows.size(), ids.size() * dim);
    EXPECT_LT(test::relative_error(rows, want), 1e-5) << "chunk " << chunk;
    if (first.empty()) first = rows;
    EXPECT_EQ(rows, first) << "chunk " << chunk << ": the same bits whatever the chunking";
    // The last row is last pooling's vector.
    EXPECT_EQ(std::vector<float>(rows.end() - ptrdiff_t(dim), rows.end()), engine.embed({ids}, {Pooling::Last}).at(0));
    test::expect_engine_idle(engine);
  }
}

TEST_F(EngineEmbed, MeanAndLastPoolingGiveDifferentVectors) {
  Engine engine({.model_path = model_, .threads = 2});
  const std::vector<int32_t> ids = cases_[0].prompt_ids;
  ASSERT_GT(ids.size(), 2u);
  const auto mean = engine.embed({ids}, {Pooling::Mean}).at(0);
  const auto last = engine.embed({ids}, {Pooling::Last}).at(0);
  const auto cls = engine.embed({ids}, {Pooling::Cls}).at(0);
  EXPECT_GT(test::relative_error(mean, last), 1e-2);
  EXPECT_GT(test::relative_error(cls, last), 1e-2);
  // A one-token input has one row: every pooling gives it.
  const std::vector<int32_t> one = {ids[0]};
  EXPECT_EQ(engine.embed({one}, {Pooling::Mean}).at(0), engine.embed({one}, {Pooling::Last}).at(0));
  EXPECT_EQ(engine.embed({one}, {Pooling::Cls}).at(0), engine.embed({one}, {Pooling::Last}).at(0));
}

TEST_F(EngineEmbed, WithoutAPoolingTypeInTheFileADecoderModelPoolsItsLastPosition) {
  Engine engine({.model_path = model_, .threads = 2});
  EXPECT_EQ(engine.model_pooling(), Pooling::Last);
  const std::vector<int32_t> ids = cases_[1].prompt_ids;
  EXPECT_EQ(engine.embed({ids}).at(0), engine.embed({ids}, {Pooling::Last}).at(0));
}

TEST_F(EngineEmbed, TextsAreTokenizedAsPromptsAre) {
  Engine engine({.model_path = model_, .threads = 2});
  const std::string text = "Once upon a time, there was a little dog.";
  const auto by_text = engine.embed({text, "Lily liked to play."});
  ASSERT_EQ(by_text.size(), 2u);
  EXPECT_EQ(by_text[0], engine.embed({engine.tokenize(text, engine.add_bos())}).at(0));
  EXPECT_NE(by_text[0], by_text[1]);
}

TEST_F(EngineEmbed, AnEmbeddingIsBitIdenticalAloneAndBatchedWithOtherTraffic) {
  Engine engine({.model_path = model_, .threads = 2, .prefill_chunk = 16});
  const std::vector<int32_t> ids = long_prompt(cases_, 60);
  std::vector<std::vector<float>> alone;
  for (Pooling p : {Pooling::Mean, Pooling::Last}) alone.push_back(engine.embed({ids}, {p}).at(0));

  // The same inputs among generations and other embeddings, all submitted at once.
  std::vector<RequestHandle> others, mine;
  for (const auto& c : cases_) others.push_back(engine.submit(test::greedy_request(c.prompt_ids, 30)));
  for (size_t n : {5u, 33u, 90u}) {
    others.push_back(engine.submit(embedding_request(long_prompt(cases_, n), Pooling::Mean)));
  }
  mine.push_back(engine.submit(embedding_request(ids, Pooling::Mean)));
  mine.push_back(engine.submit(embedding_request(ids, Pooling::Last)));
  for (size_t i = 0; i < mine.size(); ++i) {
    const Completion c = test::await(mine[i]);
    EXPECT_EQ(c.finish_reason, FinishReason::Length) << c.error;
    EXPECT_EQ(c.prompt_tokens, int32_t(ids.size()));
    EXPECT_TRUE(c.token_ids.empty()) << "an embedding generates nothing";
    EXPECT_EQ(c.embedding, alone[i]) << "pooling " << i;
  }
  for (auto& h : others) EXPECT_NE(test::await(h).finish_reason, FinishReason::Error);
  // Several inputs of one embed() share steps too.
  const auto together = engine.embed({ids, long_prompt(cases_, 20), ids}, {Pooling::Mean});
  EXPECT_EQ(together[0], alone[0]);
  EXPECT_EQ(together[2], alone[0]);
  test::expect_engine_idle(engine);
}

TEST_F(EngineEmbed, AnEmbeddingIsBitIdenticalUnderAnyPrefillChunkingAndPreemption) {
  const std::vector<int32_t> ids = long_prompt(cases_, 100);
  std::vector<std::vector<float>> want;
  {
    Engine engine({.model_path = model_, .threads = 2});
    for (Pooling p : {Pooling::Mean, Pooling::Cls, Pooling::Last}) want.push_back(engine.embed({ids}, {p}).at(0));
  }
  for (int32_t chunk : {1, 3, 16, 99}) {
    Engine engine({.model_path = model_, .threads = 2, .prefill_chunk = chunk});
    for (size_t i = 0; i < want.size(); ++i) {
      const Pooling p = std::vector{Pooling::Mean, Pooling::Cls, Pooling::Last}[i];
      EXPECT_EQ(engine.embed({ids}, {p}).at(0), want[i]) << "chunk " << chunk << ", " << pooling_name(p);
    }
  }
  // A cache too small for everything at once: generations grow and preempt the newest, the
  // embeddings among them, by recompute or swap.
  for (PreemptionMode mode : {PreemptionMode::Recompute, PreemptionMode::Swap}) {
    Engine engine({.model_path = model_,
                   .threads = 2,
                   .kv_pages = 12,
                   .tokens_per_page = 16,
                   .prefill_chunk = 8,
                   .preemption = mode});
    std::vector<RequestHandle> gens, embeds;
    for (int i = 0; i < 3; ++i) gens.push_back(engine.submit(test::greedy_request(cases_[size_t(i)].prompt_ids, 100)));
    for (Pooling p : {Pooling::Mean, Pooling::Cls, Pooling::Last})
      embeds.push_back(engine.submit(embedding_request(ids, p)));
    for (size_t i = 0; i < embeds.size(); ++i) {
      const Completion c = test::await(embeds[i]);
      EXPECT_EQ(c.embedding, want[i]) << "pooling " << i << ", " << c.preemptions << " preemptions";
    }
    for (auto& h : gens) test::await(h);
    std::printf("preemptions (mode %d): %lld\n", int(mode), static_cast<long long>(engine.metrics().preempted));
    test::expect_engine_idle(engine);
  }
}

TEST_F(EngineEmbed, LastPoolingReadsThePrefixCacheAndGivesTheSameVector) {
  Engine engine({.model_path = model_, .threads = 2, .tokens_per_page = 4});
  const std::vector<int32_t> ids = long_prompt(cases_, 30);
  const auto first = engine.embed({ids}, {Pooling::Last}).at(0);
  const int64_t hits = engine.metrics().prefix_hit_tokens;
  const auto second = engine.embed({ids}, {Pooling::Last}).at(0);
  EXPECT_GT(engine.metrics().prefix_hit_tokens, hits) << "the second read the first one's pages";
  EXPECT_EQ(first, second);
  // Mean pooling needs every row, so it reads nothing from the cache, and is still the same.
  const auto mean = engine.embed({ids}, {Pooling::Mean}).at(0);
  const int64_t hits_before_mean = engine.metrics().prefix_hit_tokens;
  EXPECT_EQ(engine.embed({ids}, {Pooling::Mean}).at(0), mean);
  EXPECT_EQ(engine.metrics().prefix_hit_tokens, hits_before_mean);
}

TEST_F(EngineEmbed, CancelAndShutdownResolveEveryEmbeddingAndReturnEveryPage) {
  Engine engine({.model_path = model_, .threads = 2, .kv_pages = 64, .max_running = 8, .prefill_chunk = 4});
  const std::vector<int32_t> ids = long_prompt(cases_, 200);
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 20; ++i) handles.push_back(engine.submit(embedding_request(ids, Pooling::Mean)));
  for (size_t i = 0; i < handles.size(); i += 2) handles[i].cancel();
  for (size_t i = 0; i < handles.size(); ++i) {
    const Completion c = test::await(handles[i]);
    if (c.finish_reason == FinishReason::Cancelled) {
      EXPECT_TRUE(c.embedding.empty()) << "a cancelled embedding has no vector";
    } else {
      EXPECT_EQ(c.finish_reason, FinishReason::Length);
      EXPECT_EQ(c.embedding.size(), size_t(engine.embedding_size()));
    }
    if (i % 2 == 1) {
      EXPECT_EQ(c.finish_reason, FinishReason::Length) << "not cancelled";
    }
  }
  test::expect_engine_idle(engine);

  handles.clear();
  for (int i = 0; i < 20; ++i) handles.push_back(engine.submit(embedding_request(ids, Pooling::Last)));
  engine.shutdown();
  for (auto& h : handles) {
    const Completion c = test::await(h);
    EXPECT_TRUE(c.finish_reason == FinishReason::Cancelled || c.finish_reason == FinishReason::Length);
  }
  test::expect_engine_idle(engine);
  EXPECT_THROW(engine.embed({ids}), Error) << "no embeddings after shutdown";
}

TEST(EngineEmbedSynthetic, EmbeddingsMatchTheOracleOnARandomGqaModel) {
  const std::string& path = test::tiny_gqa_model();
  Engine engine({.model_path = path, .threads = 2, .kv_cache_type = KvCacheType::F32, .prefill_chunk = 5});
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 37; ++i) ids.push_back(1 + (i * 37) % 999);
  for (Pooling p : {Pooling::Mean, Pooling::Cls, Pooling::Last}) {
    EXPECT_LT(test::relative_error(engine.embed({ids}, {p}).at(0), oracle_embedding(path, ids, p, true)), 1e-5)
        << pooling_name(p);
  }
}

TEST(EngineEmbedSynthetic, ThePoolingTypeInTheGgufIsWhatPoolingModelMeans) {
  ModelConfig config = test::tiny_gqa_config();
  for (auto [type, pooling] : {std::pair{0, Pooling::None}, std::pair{1, Pooling::Mean}, std::pair{2, Pooling::Cls},
                               std::pair{3, Pooling::Last}}) {
    config.pooling_type = type;
    const std::string& path = test::synth_model_once("pooling-" + std::to_string(type) + ".gguf", config, 7);
    Engine engine({.model_path = path, .threads = 1});
    EXPECT_EQ(engine.model_pooling(), pooling) << "pooling_type " << type;
    const std::vector<int32_t> ids = {1, 50, 60, 70, 80};
    EXPECT_EQ(engine.embed({ids}).at(0), engine.embed({ids}, {pooling}).at(0)) << "pooling_type " << type;
  }
  for (auto [type, phrase] : {std::pair{4, "rank"}, std::pair{9, "unknown"}}) {
    config.pooling_type = type;
    const std::string& path = test::synth_model_once("pooling-" + std::to_string(type) + ".gguf", config, 7);
    Engine engine({.model_path = path, .threads = 1});
    try {
      engine.embed({std::vector<int32_t>{1, 2, 3}});
      ADD_FAILURE() << "pooling_type " << type << " gave a vector";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    }
    EXPECT_THROW(engine.model_pooling(), Error);
    // An explicit pooling still works.
    EXPECT_EQ(engine.embed({std::vector<int32_t>{1, 2, 3}}, {Pooling::Mean}).at(0).size(), size_t(config.dim));
  }
}

// Qwen3-Embedding's files say tokenizer.ggml.add_eos_token: it pools its last position, which
// must be the EOS llama.cpp appends to the text.
TEST(EngineEmbedSynthetic, ATextInputEndsWithEosWhenTheVocabularySaysSo) {
  const std::string path = test::edited_model("embed-add-eos.gguf", test::tiny_gqa_model(), [](GgufWriter& w) {
    w.set_bool("tokenizer.ggml.add_eos_token", true);
    w.set_i32("llama.pooling_type", 3);
  });
  Engine engine({.model_path = path, .threads = 1});
  const std::vector<int32_t> ids = engine.tokenize("once upon a time", engine.add_bos());
  ASSERT_NE(ids.back(), engine.eos_id());
  std::vector<int32_t> with_eos = ids;
  with_eos.push_back(engine.eos_id());
  const std::vector<float> text = engine.embed({"once upon a time"}).at(0);
  EXPECT_EQ(text, engine.embed({with_eos}).at(0));
  EXPECT_NE(text, engine.embed({ids}).at(0));  // ids are used as given
  // Generation prompts are left alone.
  Request r = test::greedy_request(ids, 2);
  r.prompt_ids.clear();
  r.prompt = "once upon a time";
  EXPECT_EQ(engine.submit(std::move(r)).get().prompt_tokens, int32_t(ids.size()));
}

TEST(EngineEmbedSynthetic, TruncateCutsALongInputToTheContextKeepingAClosingControlToken) {
  Engine decoder({.model_path = test::tiny_gqa_model(), .threads = 1});  // context 256
  std::vector<int32_t> long_ids(300);
  for (size_t i = 0; i < long_ids.size(); ++i) long_ids[i] = int32_t(3 + i % 200);
  const std::vector<int32_t> first(long_ids.begin(), long_ids.begin() + 256);
  EXPECT_EQ(decoder.embed({long_ids}, {.truncate = true}).at(0), decoder.embed({first}).at(0));
  EXPECT_THROW(decoder.embed({long_ids}), Error);

  // A BERT input ends with [SEP]: it stays, after the first context - 1 tokens.
  const std::string bert = test::write_bert("embed-truncate-bert.gguf", test::small_bert(1));  // context 64
  Engine encoder({.model_path = bert, .threads = 1});
  const std::string text(200, 'a');
  std::vector<int32_t> ids = encoder.tokenize(std::string(100, 'b') + " " + text, true);
  ASSERT_GT(ids.size(), 64u);
  std::vector<int32_t> cut(ids.begin(), ids.begin() + 63);
  cut.push_back(ids.back());
  const std::vector<float> got = encoder.embed({std::string(100, 'b') + " " + text}, {.truncate = true}).at(0);
  EXPECT_EQ(got, encoder.embed({cut}).at(0));
}

TEST(EngineEmbedSynthetic, BadInputIsRefusedWithAClearError) {
  Engine engine({.model_path = test::tiny_gqa_model(), .threads = 1});  // context 256
  auto refused = [&](const std::vector<EmbeddingInput>& inputs, const std::string& phrase) {
    try {
      engine.embed(inputs);
      ADD_FAILURE() << "embedded input that should fail with '" << phrase << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    }
  };
  refused({}, "no inputs");
  refused({"fine", ""}, "input 1: the prompt is empty");
  refused({std::vector<int32_t>{1, 1000}}, "outside the vocabulary");
  const std::vector<int32_t> too_long(257, 5);
  refused({"fine", too_long}, "input 1: the input has 257 tokens, more than the context length 256");
  EXPECT_EQ(engine.metrics().finished, 0) << "nothing was queued for a refused call";
  // The whole context fits: an embedding has no tokens to generate after it.
  EXPECT_EQ(engine.embed({std::vector<int32_t>(256, 5)}).at(0).size(), size_t(engine.embedding_size()));

  Request r = embedding_request({1, 2, 3}, Pooling::Last);
  r.logprobs = 0;
  EXPECT_THROW(engine.submit(r), Error);
  r = embedding_request({1, 2, 3}, Pooling::Last);
  r.grammar = "root ::= \"a\"";
  EXPECT_THROW(engine.submit(r), Error);
  r = embedding_request({1, 2, 3}, Pooling::Last);
  r.max_new_tokens = 0;  // ignored: nothing is generated
  RequestHandle h = engine.submit(r);
  EXPECT_EQ(test::await(h).embedding.size(), size_t(engine.embedding_size()));
  test::expect_engine_idle(engine);
}

}  // namespace
}  // namespace pagoda
