// The encoder path: EncoderRunner computes what the reference encoder computes (F32 and Q8_0),
// gives each sequence the same bits alone or batched on any thread count, and scores with the
// rank head; the Engine serves an encoder's embeddings and rerank scores through the encoder
// scheduler, refuses what an encoder cannot do by name, and resolves every future on cancel
// and shutdown.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <future>
#include <numeric>
#include <random>
#include <thread>

#include "engine/forward/encoder_runner.h"
#include "engine/model/model.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/bert_models.h"
#include "support/test_support.h"
#include "testing/reference_encoder.h"

namespace pagoda {
namespace {

using Ids = std::vector<int32_t>;
using test::small_bert;
using test::write_bert;

using test::cosine;
using test::max_abs_diff;
using test::random_ids;
using test::run_alone;

TEST(EncoderRunner, ComputesWhatTheReferenceEncoderComputesRowForRow) {
  for (const GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
    const Model model =
        load_model(write_bert(type == GgmlType::F32 ? "enc-f32.gguf" : "enc-q8.gguf", small_bert(1), type));
    test::expect_rows_match_reference(model, "bert", 2e-5, 0.9999);
  }
}

TEST(EncoderRunner, GivesEachSequenceTheSameBitsAloneOrInAnyBatchOnAnyThreadCount) {
  for (const GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
    const Model model =
        load_model(write_bert(type == GgmlType::F32 ? "enc-inv-f32.gguf" : "enc-inv-q8.gguf", small_bert(1), type));
    test::expect_batch_invariant(model, "bert");
  }
}

TEST(EncoderRunner, ScoresWithTheRankHeadAsTheReferenceDoes) {
  const Model model = load_model(write_bert("enc-rank.gguf", small_bert(4)));
  test::expect_rank_scores_match_reference(model, 1e-4);
  const Model mean = load_model(write_bert("enc-no-rank.gguf", small_bert(1)));
  EncoderRunner no_head(mean, 1);
  const std::vector<float> row(size_t(mean.config.dim), 0.5f);
  float score = 0;
  EXPECT_THROW(no_head.rank_scores(row.data(), 1, &score), Error);
}

TEST(EncoderRunner, RefusesAnEmptyATooLongOrAnOutOfVocabularySequence) {
  const Model model = load_model(write_bert("enc-bad.gguf", small_bert(1)));
  EncoderRunner runner(model, 1);
  test::expect_error_containing([&] { run_alone(runner, Ids{}); }, "empty");
  test::expect_error_containing([&] { run_alone(runner, Ids(65, 7)); }, "context length");
  test::expect_error_containing([&] { run_alone(runner, Ids{1, 600}); }, "outside the vocabulary");
}

EngineConfig encoder_config(const std::string& path) { return {.model_path = path, .threads = 2}; }

TEST(EncoderEngine, EmbedsWithTheModelsPoolingOrTheOneAskedForAsTheReferenceDoes) {
  const std::vector<std::string> texts = {"hello world", "the quick brown fox jumps", "a"};
  for (const int32_t pooling_type : {1, 2, 3}) {
    const std::string path =
        write_bert("enc-engine-" + std::to_string(pooling_type) + ".gguf", small_bert(pooling_type));
    const Model model = load_model(path);
    const ReferenceEncoder reference(model);
    Engine engine(encoder_config(path));
    EXPECT_TRUE(engine.embedding_only());
    const std::vector<std::vector<float>> got = engine.embed({texts[0], texts[1], texts[2]});
    for (size_t i = 0; i < texts.size(); ++i) {
      const Ids ids = engine.tokenize(texts[i], engine.add_bos());
      const std::vector<float> want = reference.embed(ids, EncoderPooling(pooling_type));
      EXPECT_LT(max_abs_diff(got[i], want), 1e-5) << "pooling " << pooling_type << ", input " << i;
    }
    // Another pooling asked for by name, unnormalized.
    const Ids ids = engine.tokenize(texts[1], true);
    const std::vector<float> last = engine.embed({ids}, {Pooling::Last, false})[0];
    const std::vector<float> want = reference.pool(reference.hidden_states(ids), EncoderPooling::Last);
    EXPECT_LT(max_abs_diff(last, want), 2e-5);
  }
}

TEST(EncoderEngine, RerankScoresEachPairAsTheReferenceDoesInTheSameOrder) {
  const std::string path = write_bert("enc-engine-rank.gguf", small_bert(4));
  const Model model = load_model(path);
  const ReferenceEncoder reference(model);
  Engine engine(encoder_config(path));
  EXPECT_EQ(engine.model_pooling(), Pooling::Rank);
  const std::string query = "what is a fox";
  const std::vector<std::string> documents = {"a fox is an animal", "the weather is nice", "foxes run", "x y z",
                                              "what is what"};
  const std::vector<float> scores = engine.rerank(query, documents);
  ASSERT_EQ(scores.size(), documents.size());
  std::vector<float> want;
  for (const std::string& d : documents) {
    const Ids ids = engine.rerank_tokens(query, d);
    // BERT's pair layout: [CLS] query [SEP] document [SEP].
    EXPECT_EQ(ids.front(), model.tokenizer.bos_id());
    EXPECT_EQ(ids.back(), model.tokenizer.sep_id());
    EXPECT_EQ(std::count(ids.begin(), ids.end(), model.tokenizer.sep_id()), 2);
    want.push_back(reference.embed(ids, EncoderPooling::Rank)[0]);
  }
  for (size_t i = 0; i < scores.size(); ++i) EXPECT_NEAR(scores[i], want[i], 1e-4) << "document " << i;
  auto ranking = [](const std::vector<float>& s) {
    std::vector<size_t> order(s.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s[a] > s[b]; });
    return order;
  };
  EXPECT_EQ(ranking(scores), ranking(want));
}

TEST(EncoderEngine, RefusesWhatAnEncoderCannotDoSayingWhat) {
  const std::string mean_path = write_bert("enc-refuse-mean.gguf", small_bert(1));
  const std::string rank_path = write_bert("enc-refuse-rank.gguf", small_bert(4));
  Engine mean(encoder_config(mean_path)), rank(encoder_config(rank_path));
  Request generate;
  generate.prompt = "hello";
  test::expect_error_containing([&] { mean.submit(generate); }, "embedding model");
  test::expect_error_containing([&] { rank.embed({"hello"}); }, "reranker");
  test::expect_error_containing([&] { mean.rerank("q", {"d"}); }, "not a reranker");
  test::expect_error_containing([&] { rank.rerank("q", {}); }, "no documents");
  test::expect_error_containing([&] { mean.embed({""}); }, "empty");
  test::expect_error_containing([&] { mean.embed({Ids(65, 5)}); }, "context length");
  test::expect_error_containing([&] { mean.embed({Ids{1, 600}}); }, "outside the vocabulary");
  test::expect_error_containing([&] { rank.rerank("q", {std::string(400, 'a') + " b c d e f g"}); }, "context length");
  test::expect_error_containing([&] { mean.load_adapter("a", mean_path); }, "no LoRA adapters");
  Request adapted;
  adapted.prompt = "hello";
  adapted.embedding = EmbeddingParams{};
  adapted.adapter = "mine";
  test::expect_error_containing([&] { mean.submit(adapted); }, "unknown adapter");
  // Still serving after every refusal.
  EXPECT_EQ(mean.embed({"hello"}).size(), 1u);
}

TEST(EncoderEngine, ManyThreadsSubmittingAtOnceGetTheBitsTheyGetAlone) {
  const std::string path = write_bert("enc-threads.gguf", small_bert(1));
  Engine engine(encoder_config(path));
  std::mt19937 rng(3);
  std::vector<Ids> inputs;
  for (int i = 0; i < 48; ++i) inputs.push_back(random_ids(rng, 1 + int32_t(rng() % 64), 600));
  std::vector<std::vector<float>> alone;
  for (const Ids& ids : inputs) alone.push_back(engine.embed({ids})[0]);
  std::vector<std::thread> threads;
  std::vector<std::vector<std::vector<float>>> got(4);
  for (size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < inputs.size(); i += got.size()) got[t].push_back(engine.embed({inputs[i]})[0]);
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t t = 0; t < got.size(); ++t) {
    for (size_t k = 0; k < got[t].size(); ++k) EXPECT_EQ(got[t][k], alone[t + k * got.size()]) << t << "/" << k;
  }
  // And all of them as one call, which batches them.
  std::vector<EmbeddingInput> all(inputs.begin(), inputs.end());
  EXPECT_EQ(engine.embed(all), alone);
}

TEST(EncoderEngine, CancelAndShutdownWithRequestsInFlightResolveEveryFuture) {
  const std::string path = write_bert("enc-shutdown.gguf", small_bert(1));
  Engine engine({.model_path = path, .threads = 1, .max_tokens_per_step = 64});
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 200; ++i) {
    Request r;
    r.prompt_ids = Ids(64, int32_t(1 + i % 500));
    r.embedding = EmbeddingParams{};
    handles.push_back(engine.submit(std::move(r)));
    if (i % 2) handles.back().cancel();
  }
  engine.shutdown();
  int embedded = 0, cancelled = 0;
  for (RequestHandle& h : handles) {
    const Completion c = h.get();
    if (c.finish_reason == FinishReason::Length) {
      EXPECT_EQ(c.embedding.size(), 64u);
      ++embedded;
    } else {
      EXPECT_EQ(c.finish_reason, FinishReason::Cancelled);
      ++cancelled;
    }
  }
  EXPECT_GE(cancelled, 100);
  EXPECT_EQ(embedded + cancelled, 200);
  const EngineMetrics m = engine.metrics();
  EXPECT_EQ(m.queued, 0);
  EXPECT_EQ(m.running, 0);
  EXPECT_EQ(m.finished, 200);
  test::expect_error_containing([&] { engine.embed({"late"}); }, "shut down");
}

}  // namespace
}  // namespace pagoda
