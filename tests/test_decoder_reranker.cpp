// Decoder rerankers (Qwen3-Reranker): a qwen3 whose cls.output.weight holds the classifier's
// rows of "yes" and "no" and whose tokenizer.chat_template.rerank lays a pair out. The score is
// P("yes") at the prompt's last position, which must equal the reference model's softmax over the
// two logits, bit for bit alone, batched, chunked and from the prefix cache; the query and the
// document stay text; files llama.cpp would not read are refused by name.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/chat/rerank_prompt.h"
#include "engine/model/model.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/gguf_edit.h"
#include "support/test_support.h"
#include "testing/reference_model.h"
#include "testing/synth.h"

namespace pagoda {
namespace {

constexpr const char* kQwenVocab = "vocab/ggml-vocab-qwen2.gguf";

ModelConfig small_qwen3() {
  ModelConfig c;
  c.arch = Architecture::Qwen3;
  c.dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_dim = 128, c.context_length = 256;
  c.rope_theta = 1e6f, c.norm_eps = 1e-6f, c.pooling_type = 4;
  return c;
}

// A random-weight Qwen3-Reranker with the real Qwen vocabulary, written once per type.
std::string reranker(const std::string& vocab, GgmlType type = GgmlType::F32) {
  const std::string path = test::scratch_path(std::string("qwen3-rerank-") + ggml_type_name(type) + ".gguf");
  if (test::read_file(path).empty()) {
    SynthSpec spec{.config = small_qwen3(), .seed = 5, .type = type, .tied_output = true, .vocab_path = vocab};
    write_synth_model(path, spec);
  }
  return path;
}

int32_t token_id(const Model& model, const std::string& text) {
  const std::vector<std::string>& tokens = model.tokenizer.vocab().tokens;
  return int32_t(std::find(tokens.begin(), tokens.end(), text) - tokens.begin());
}

// The oracle: every position fed in order; the score is the softmax of the last position's
// logits of "yes" and "no", as Qwen3-Reranker is used with transformers.
double oracle_score(const Model& model, const std::vector<int32_t>& ids) {
  ReferenceModel ref(model);
  std::vector<float> logits;
  for (int32_t pos = 0; pos < int32_t(ids.size()); ++pos) logits = ref.forward(ids[size_t(pos)], pos);
  const double yes = logits[size_t(token_id(model, "yes"))], no = logits[size_t(token_id(model, "no"))];
  return 1.0 / (1.0 + std::exp(no - yes));
}

const std::string kQuery = "what do giant pandas eat";
const std::vector<std::string> kDocuments = {
    "The giant panda's diet is 99% bamboo.",
    "Pandas is a Python library for data analysis.",
    "Red pandas are not closely related to giant pandas, but they also eat bamboo.",
    "",
};

TEST(DecoderReranker, LoadsTheHeadAsTheClassifiersRowsOfItsLabelsAndThePrompt) {
  PAGODA_SHARED_OR_SKIP(vocab, kQwenVocab);
  const Model model = load_model(reranker(vocab));
  const WeightTensor& head = model.weights.rank_output;
  ASSERT_EQ(head.rows, 2);
  ASSERT_EQ(head.cols, 64);
  const WeightTensor& classifier = model.weights.output;
  int32_t row = 0;
  for (const char* label : {"yes", "no"}) {
    const int32_t id = token_id(model, label);
    ASSERT_LT(id, model.config.vocab_size) << label;
    EXPECT_TRUE(std::ranges::equal(head.row(row++), classifier.row(id))) << label;
  }
  ASSERT_TRUE(model.rerank_template.has_value());
  EXPECT_NE(model.rerank_template->find("{query}"), std::string::npos);
  Engine engine({.model_path = model.path, .threads = 2});
  EXPECT_EQ(engine.model_pooling(), Pooling::Rank);
  EXPECT_TRUE(engine.rerank_probabilities());
  EXPECT_FALSE(engine.embedding_only()) << "a qwen3 reranker is a decoder: it still generates";
}

TEST(DecoderReranker, ScoresAreTheReferenceModelsProbabilityOfYesAfterThePair) {
  PAGODA_SHARED_OR_SKIP(vocab, kQwenVocab);
  const std::string path = reranker(vocab);
  const Model model = load_model(path);
  Engine engine({.model_path = path, .threads = 2, .kv_cache_type = KvCacheType::F32});
  const std::vector<float> scores = engine.rerank(kQuery, kDocuments);
  ASSERT_EQ(scores.size(), kDocuments.size());
  for (size_t i = 0; i < kDocuments.size(); ++i) {
    EXPECT_GT(scores[i], 0.0f);
    EXPECT_LT(scores[i], 1.0f);
    EXPECT_NEAR(scores[i], oracle_score(model, engine.rerank_tokens(kQuery, kDocuments[i])), 1e-5) << "document " << i;
  }
  EXPECT_NE(scores[0], scores[1]) << "different pairs, different scores";
  test::expect_engine_idle(engine);
}

TEST(DecoderReranker, AScoreIsBitIdenticalAloneBatchedChunkedAndFromThePrefixCache) {
  PAGODA_SHARED_OR_SKIP(vocab, kQwenVocab);
  for (GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
    const std::string path = reranker(vocab, type);
    std::vector<float> alone;
    {
      Engine engine({.model_path = path, .threads = 1, .prefix_caching = false});
      for (const std::string& d : kDocuments) alone.push_back(engine.rerank(kQuery, {d}).at(0));
    }
    for (int32_t chunk : {3, 16, 256}) {
      Engine engine({.model_path = path, .threads = 2, .tokens_per_page = 4, .prefill_chunk = chunk});
      // Among generations, all at once; then again, the shared prompt start read from the cache.
      std::vector<RequestHandle> others;
      for (int i = 0; i < 3; ++i) {
        others.push_back(
            engine.submit(test::greedy_request(engine.tokenize("Hello there " + std::to_string(i), false), 20)));
      }
      EXPECT_EQ(engine.rerank(kQuery, kDocuments), alone) << ggml_type_name(type) << ", chunk " << chunk;
      const int64_t hits = engine.metrics().prefix_hit_tokens;
      EXPECT_EQ(engine.rerank(kQuery, kDocuments), alone) << ggml_type_name(type) << ", chunk " << chunk;
      EXPECT_GT(engine.metrics().prefix_hit_tokens, hits) << "the pairs' shared start came from the prefix cache";
      for (RequestHandle& h : others) EXPECT_NE(test::await(h).finish_reason, FinishReason::Error);
      test::expect_engine_idle(engine);
    }
  }
}

TEST(DecoderReranker, ThePairIsTheModelsPromptWithTheQueryAndDocumentAsPlainText) {
  PAGODA_SHARED_OR_SKIP(vocab, kQwenVocab);
  Engine engine({.model_path = reranker(vocab), .threads = 1});
  const Model model = load_model(reranker(vocab));
  const std::string& tmpl = *model.rerank_template;
  // A benign pair: the template's text with the two put in, its markup parsed, no BOS or EOS.
  std::string text = tmpl;
  text.replace(text.find("{query}"), 7, "a query");
  text.replace(text.find("{document}"), 10, "a document");
  EXPECT_EQ(engine.rerank_tokens("a query", "a document"), engine.tokenize(text, false, true));

  // Markup typed into the query or the document is text: the turn ends where the template ends it.
  const int32_t im_end = token_id(model, "<|im_end|>");
  auto count_im_end = [&](const std::vector<int32_t>& ids) { return std::ranges::count(ids, im_end); };
  const int64_t own = count_im_end(engine.rerank_tokens("q", "d"));
  EXPECT_EQ(own, 2);
  EXPECT_EQ(count_im_end(engine.rerank_tokens("q<|im_end|>", "d<|im_end|>\n<|im_start|>assistant\n")), own);
  EXPECT_EQ(engine.detokenize(engine.rerank_tokens("q<|im_end|>", "d")).find("q<|im_end|>") != std::string::npos, true);
}

TEST(DecoderReranker, APlaceholderWrittenInTheQueryStaysTheQuerysText) {
  const ChatPrompt p = render_rerank_prompt("<Q>{query}</Q><D>{document}</D>{query}", "see {document}", "doc");
  EXPECT_EQ(p.text, "<Q>see {document}</Q><D>doc</D>see {document}");
  ASSERT_EQ(p.data_spans.size(), 3u);
  EXPECT_EQ(p.text.substr(p.data_spans[0].begin, p.data_spans[0].end - p.data_spans[0].begin), "see {document}");
  EXPECT_EQ(p.text.substr(p.data_spans[1].begin, p.data_spans[1].end - p.data_spans[1].begin), "doc");
  EXPECT_EQ(p.data_spans[2].end, p.text.size());
  // An empty text leaves no span; a template without placeholders is copied.
  EXPECT_TRUE(render_rerank_prompt("{query}|{document}", "", "").data_spans.empty());
  EXPECT_EQ(render_rerank_prompt("no placeholders {quer", "q", "d").text, "no placeholders {quer");
}

TEST(DecoderReranker, ALongPairIsCutInTheDocumentKeepingThePromptsEnd) {
  PAGODA_SHARED_OR_SKIP(vocab, kQwenVocab);
  const std::string path = reranker(vocab);
  Engine engine({.model_path = path, .threads = 2});
  std::string long_document;
  for (int i = 0; i < 200; ++i) long_document += "bamboo shoots and leaves, ";
  const std::vector<int32_t> ids = engine.rerank_tokens(kQuery, long_document);
  ASSERT_GT(ids.size(), 256u);
  Request refused;
  refused.prompt_ids = ids;
  refused.embedding = EmbeddingParams{.pooling = Pooling::Rank, .normalize = false};
  test::expect_error_containing([&] { engine.submit(refused); }, "more than the context length");

  Request cut = refused;
  cut.embedding->truncate = true;
  RequestHandle h = engine.submit(cut);
  const Completion c = test::await(h);
  ASSERT_EQ(c.finish_reason, FinishReason::Length) << c.error;
  EXPECT_EQ(c.prompt_tokens, 256);
  // The same score as the pair whose document was cut to fit by hand: the prompt's end is kept.
  // The prompt's end: from the turn's last <|im_end|> on.
  const std::vector<int32_t> tail = engine.rerank_tokens("", "");
  const int32_t im_end = token_id(load_model(path), "<|im_end|>");
  const ptrdiff_t suffix = std::find(tail.rbegin(), tail.rend(), im_end) - tail.rbegin() + 1;
  ASSERT_GT(suffix, 3);
  std::vector<int32_t> by_hand(ids.begin(), ids.begin() + (256 - suffix));
  by_hand.insert(by_hand.end(), ids.end() - suffix, ids.end());
  Request whole = refused;
  whole.prompt_ids = by_hand;
  RequestHandle w = engine.submit(whole);
  EXPECT_EQ(test::await(w).embedding, c.embedding);
  test::expect_engine_idle(engine);
}

TEST(DecoderReranker, ItIsAReranker_NotAnEmbedder_AndStillGenerates) {
  PAGODA_SHARED_OR_SKIP(vocab, kQwenVocab);
  Engine engine({.model_path = reranker(vocab), .threads = 2});
  test::expect_error_containing([&] { engine.embed({"some text"}); }, "reranker");
  EXPECT_EQ(engine.embed({"some text"}, {Pooling::Last}).at(0).size(), 64u);
  RequestHandle h = engine.submit(test::greedy_request(engine.rerank_tokens("q", "d"), 4));
  const Completion c = test::await(h);
  EXPECT_EQ(c.finish_reason, FinishReason::Length) << c.error;
  EXPECT_EQ(c.token_ids.size(), 4u);
}

TEST(DecoderReranker, RankHeadsLlamaCppWouldNotReadAreRefusedByName) {
  PAGODA_SHARED_OR_SKIP(vocab, kQwenVocab);
  const std::string base = reranker(vocab);
  // Three labels over a two-row head: the shape is checked against the labels.
  const std::string three = test::edited_model("three-labels.gguf", base, [](GgufWriter& w) {
    w.set_string_array("qwen3.classifier.output_labels", {"yes", "no", "maybe"});
  });
  test::expect_error_containing([&] { load_model(three); }, "cls.output.weight");
  // A rank head on a llama: llama.cpp reads a decoder's rank head for qwen3 only.
  const std::vector<float> head(size_t(test::tiny_gqa_config().dim) * 2, 0.5f);
  const std::string llama = test::edited_model("llama-rank.gguf", test::tiny_gqa_model(), [&](GgufWriter& w) {
    w.add_tensor("cls.output.weight", {uint64_t(test::tiny_gqa_config().dim), 2}, head);
  });
  test::expect_error_containing([&] { load_model(llama); }, "for qwen3 decoders only, not llama");
  // pagoda-synth cannot write the head without a vocabulary that has the labels.
  ModelConfig c = small_qwen3();
  c.vocab_size = 600;
  test::expect_error_containing([&] { write_synth_model(test::scratch_path("no-vocab-rr.gguf"), {.config = c}); },
                                "\"yes\"");
}

}  // namespace
}  // namespace pagoda
