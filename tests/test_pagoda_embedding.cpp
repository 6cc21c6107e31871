// pagoda-embedding as people run it: the built binary on a small random-weight decoder, its
// vectors read back in every output format and checked against Engine::embed in this process,
// each --embd-normalize as llama.cpp's common_embd_normalize scales, prompts split from -p and
// -f, and the refusals; then on random-weight berts, an embedder's vectors and a reranker's one
// score per QUERY<TAB>DOCUMENT prompt, each equal to the Engine's.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using nlohmann::json;

using ProgramOutput = test::ProgramStreams;

// The program with `args` (a shell command line's words), on one thread.
ProgramOutput run(const std::string& args) { return test::run_program_streams("pagoda-embedding", "-t 1 " + args); }

// The vectors of a run with --embd-output-format json.
std::vector<std::vector<float>> json_vectors(const std::string& args) {
  const ProgramOutput r = run(args + " --embd-output-format json");
  EXPECT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  std::vector<std::vector<float>> out;
  if (j.is_discarded()) return out;
  EXPECT_EQ(j.at("object"), "list");
  for (size_t i = 0; i < j.at("data").size(); ++i) {
    EXPECT_EQ(j["data"][i].at("object"), "embedding");
    EXPECT_EQ(j["data"][i].at("index"), i);
    out.push_back(j["data"][i].at("embedding").get<std::vector<float>>());
  }
  return out;
}

// `text` as one shell word, its newlines and tabs made by printf (popen's /bin/sh has no $'...').
std::string word(const std::string& text) {
  std::string out = "\"$(printf '";
  for (char c : text) out += c == '\n' ? std::string("\\n") : c == '\t' ? std::string("\\t") : std::string(1, c);
  return out + "')\"";
}

const std::string& decoder() { return test::tiny_gqa_model(); }

std::string model_flag() { return "-m " + decoder(); }

// Engine::embed's vectors of `texts` in this process, unnormalized.
std::vector<std::vector<float>> engine_vectors(const std::vector<std::string>& texts,
                                               Pooling pooling = Pooling::Model) {
  EngineConfig config;
  config.model_path = decoder();
  config.threads = 1;
  Engine engine(config);
  std::vector<EmbeddingInput> inputs(texts.begin(), texts.end());
  return engine.embed(inputs, {pooling, false});
}

// The sum of |x|^p, or the largest |x| for p = 0.
double norm_sum(const std::vector<float>& v, int p) {
  double s = 0.0;
  for (float x : v) s = p == 0 ? std::max(s, double(std::abs(x))) : s + std::pow(std::abs(double(x)), p);
  return s;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tolerance) << "value " << i;
}

TEST(PagodaEmbedding, EachPromptIsOneUnitVectorEqualToTheEngines) {
  const std::vector<std::vector<float>> got =
      json_vectors(model_flag() + " -p " + word("Once upon a time\nThe dog ran\nhi"));
  const std::vector<std::vector<float>> raw = engine_vectors({"Once upon a time", "The dog ran", "hi"});
  ASSERT_EQ(got.size(), 3u);
  for (size_t j = 0; j < got.size(); ++j) {
    EXPECT_NEAR(norm_sum(got[j], 2), 1.0, 1e-5);
    std::vector<float> want = raw[j];
    const double length = std::sqrt(norm_sum(want, 2));
    for (float& x : want) x = float(x / length);
    expect_near(got[j], want, 1e-6);  // printed with 7 decimals
  }
}

TEST(PagodaEmbedding, EveryNormalizationScalesAsLlamaCppDoes) {
  const std::vector<float> raw = engine_vectors({"The little dog ran to the park."})[0];
  const std::string prompt = model_flag() + " -p 'The little dog ran to the park.'";
  expect_near(json_vectors(prompt + " --embd-normalize -1")[0], raw, 1e-6);
  // 0: the largest |x| becomes 32760 (the int16 range), printed as whole numbers.
  const std::vector<float> int16 = json_vectors(prompt + " --embd-normalize 0")[0];
  EXPECT_NEAR(norm_sum(int16, 0), 32760.0, 0.5);
  for (float x : int16) EXPECT_EQ(x, std::round(x));
  EXPECT_NEAR(norm_sum(json_vectors(prompt + " --embd-normalize 1")[0], 1), 1.0, 1e-5);  // taxicab
  EXPECT_NEAR(norm_sum(json_vectors(prompt + " --embd-normalize 3")[0], 3), 1.0, 1e-5);  // the 3-norm
}

TEST(PagodaEmbedding, ThePoolingFlagPicksThePooling) {
  const std::vector<float> cls = engine_vectors({"Tom and Sue went to the sea."}, Pooling::Cls)[0];
  const std::vector<float> got =
      json_vectors(model_flag() + " -p 'Tom and Sue went to the sea.' --pooling cls --embd-normalize -1")[0];
  expect_near(got, cls, 1e-6);
  const std::vector<float> mean =
      json_vectors(model_flag() + " -p 'Tom and Sue went to the sea.' --pooling mean --embd-normalize -1")[0];
  expect_near(mean, engine_vectors({"Tom and Sue went to the sea."}, Pooling::Mean)[0], 1e-6);
}

// llama-embedding's --pooling none: one vector per token, of every prompt in turn.
TEST(PagodaEmbedding, PoolingNonePrintsEveryTokensVector) {
  const std::vector<std::string> texts = {"Tom and Sue", "went to the sea."};
  const std::vector<std::vector<float>> got =
      json_vectors(model_flag() + " -p " + word(texts[0] + "\n" + texts[1]) + " --pooling none --embd-normalize -1");
  const std::vector<std::vector<float>> rows = engine_vectors(texts, Pooling::None);
  const size_t dim = size_t(test::tiny_gqa_config().dim);
  ASSERT_EQ(got.size(), (rows[0].size() + rows[1].size()) / dim);
  size_t j = 0;
  for (const std::vector<float>& input : rows) {
    for (size_t r = 0; r < input.size(); r += dim, ++j) {
      expect_near(got[j], {input.begin() + ptrdiff_t(r), input.begin() + ptrdiff_t(r + dim)}, 1e-6);
    }
  }
  // The readable format: "embedding N:" for each token, its first and last three values.
  const ProgramOutput text = run(model_flag() + " -p " + word(texts[0]) + " --pooling none");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("embedding " + std::to_string(rows[0].size() / dim - 1) + ": "), std::string::npos);
  EXPECT_NE(text.out.find(" ... "), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("cosine"), std::string::npos) << text.out;
}

TEST(PagodaEmbedding, ArrayRawAndJsonPlusHoldTheSameNumbersAsJson) {
  const std::string prompts = model_flag() + " -p hello -p world";  // two -p: two prompts
  const std::vector<std::vector<float>> want = json_vectors(prompts);
  ASSERT_EQ(want.size(), 2u);

  const ProgramOutput array = run(prompts + " --embd-output-format array");
  ASSERT_EQ(array.status, 0) << array.err;
  EXPECT_EQ(json::parse(array.out).get<std::vector<std::vector<float>>>(), want);

  const ProgramOutput raw = run(prompts + " --embd-output-format raw");
  ASSERT_EQ(raw.status, 0) << raw.err;
  std::istringstream lines(raw.out);
  for (const std::vector<float>& row : want) {
    std::string line;
    ASSERT_TRUE(std::getline(lines, line));
    std::istringstream values(line);
    std::vector<float> got;
    for (float x; values >> x;) got.push_back(x);
    EXPECT_EQ(got, row);
  }

  const ProgramOutput plus = run(prompts + " --embd-output-format json+");
  ASSERT_EQ(plus.status, 0) << plus.err;
  const json j = json::parse(plus.out);
  EXPECT_EQ(j.at("data").size(), 2u);
  const json& cosine = j.at("cosineSimilarity");
  ASSERT_EQ(cosine.size(), 2u);
  EXPECT_NEAR(cosine[0][0].get<double>(), 1.0, 0.005);
  EXPECT_NEAR(cosine[1][1].get<double>(), 1.0, 0.005);
  EXPECT_EQ(cosine[0][1], cosine[1][0]);
}

TEST(PagodaEmbedding, TheReadableFormatShowsVectorsAndTheirCosineMatrix) {
  const ProgramOutput one = run(model_flag() + " -p hello");
  ASSERT_EQ(one.status, 0) << one.err;
  // One prompt: its whole vector (64 values).
  std::istringstream first(one.out.substr(one.out.find(':') + 1));
  int values = 0;
  for (float x; first >> x;) ++values;
  EXPECT_EQ(values, 64);
  EXPECT_EQ(one.out.find("cosine"), std::string::npos);

  const ProgramOutput two = run(model_flag() + " -p " + word("hello\nworld"));
  ASSERT_EQ(two.status, 0) << two.err;
  EXPECT_EQ(two.out.rfind("embedding 0: ", 0), 0u) << two.out;
  EXPECT_NE(two.out.find("\nembedding 1: "), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("cosine similarity matrix:"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("  1.00 "), std::string::npos) << two.out;
}

TEST(PagodaEmbedding, PromptsComeFromAFileSplitAtTheSeparator) {
  const std::string file = test::scratch_path("prompts.txt");
  std::ofstream(file) << "first text<#>second text<#>third\n";  // the trailing newline is dropped
  const std::vector<std::vector<float>> got =
      json_vectors(model_flag() + " -f " + file + " --embd-separator '<#>' --embd-normalize -1");
  const std::vector<std::vector<float>> want = engine_vectors({"first text", "second text", "third"});
  ASSERT_EQ(got.size(), 3u);
  for (size_t j = 0; j < got.size(); ++j) expect_near(got[j], want[j], 1e-6);
}

TEST(PagodaEmbedding, BadFlagsAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {model_flag() + " -p a --pooling max", "--pooling must be"},
      {model_flag() + " -p a --pooling rank", "--pooling rank needs a reranker"},
      {model_flag() + " -p a --embd-normalize -2", "--embd-normalize must be"},
      {model_flag() + " -p a --embd-output-format xml", "--embd-output-format must be"},
      {model_flag(), "-p TEXT or -f FILE"},
      {"-p a", "-m MODEL is required"},
      {model_flag() + " -p " + word("a\n\nb"), "input 1: the prompt is empty"},
      {model_flag() + " -p a -c 512", "unknown argument '-c'"},
  };
  for (const auto& [args, message] : cases) {
    const ProgramOutput r = run(args);
    EXPECT_EQ(r.status, 1) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << " said: " << r.err;
    EXPECT_EQ(r.out, "") << args;
  }
}

// A random-weight bert of `pooling_type` (llama.cpp's numbers: 1 mean, 4 rank), written once.
const std::string& bert(const std::string& name, int32_t pooling_type) {
  ModelConfig c;
  c.arch = Architecture::Bert;
  c.dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 4, c.ffn_dim = 128;
  c.vocab_size = 600, c.context_length = 64, c.norm_eps = 1e-12f, c.pooling_type = pooling_type;
  return test::synth_model_once(name, c, 5);
}

Engine engine_on(const std::string& path) {
  EngineConfig config;
  config.model_path = path;
  config.threads = 1;
  return Engine(config);
}

TEST(PagodaEmbedding, AnEncodersVectorsAreTheEngines) {
  const std::string& path = bert("bert-mean.gguf", 1);
  std::vector<std::vector<float>> want;
  {
    Engine engine = engine_on(path);
    want = engine.embed({"the cat sat on the mat", "a dog ran"});
  }
  const std::vector<std::vector<float>> got =
      json_vectors("-m " + path + " -p " + word("the cat sat on the mat\na dog ran"));
  ASSERT_EQ(got.size(), 2u);
  for (size_t j = 0; j < got.size(); ++j) expect_near(got[j], want[j], 1e-6);
}

TEST(PagodaEmbedding, ARerankerPrintsOneScorePerQueryDocumentPair) {
  const std::string& path = bert("bert-rank.gguf", 4);
  Engine engine = engine_on(path);
  const std::vector<std::string> documents = {"the cat sat on the mat", "a dog ran", "zebra"};
  const std::vector<float> want = engine.rerank("where did the cat sit", documents);
  const std::string prompts = "-m " + path + " -p " +
                              word(
                                  "where did the cat sit\tthe cat sat on the mat\nwhere did the cat sit\ta dog ran\n"
                                  "where did the cat sit\tzebra");
  const ProgramOutput text = run(prompts);
  ASSERT_EQ(text.status, 0) << text.err;
  for (size_t j = 0; j < want.size(); ++j) {
    char line[64];
    std::snprintf(line, sizeof line, "rerank score %zu: %8.3f\n", j, double(want[j]));
    EXPECT_NE(text.out.find(line), std::string::npos) << text.out;
  }
  // Scores are raw, whatever --embd-normalize says; json holds each as a one-value vector.
  const std::vector<std::vector<float>> got = json_vectors(prompts + " --embd-normalize 2");
  ASSERT_EQ(got.size(), want.size());
  for (size_t j = 0; j < want.size(); ++j) {
    ASSERT_EQ(got[j].size(), 1u);
    EXPECT_NEAR(got[j][0], want[j], 1e-6 * std::max(1.0f, std::abs(want[j])));
  }
  const ProgramOutput no_pair = run("-m " + path + " -p 'no tab here'");
  EXPECT_EQ(no_pair.status, 1);
  EXPECT_NE(no_pair.err.find("QUERY<TAB>DOCUMENT"), std::string::npos) << no_pair.err;
}

}  // namespace
}  // namespace pagoda
