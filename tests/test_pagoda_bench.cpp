// pagoda-bench as people run it: the built binary on a tiny synthetic model, its JSON read back
// and checked against what was asked (tests, depths, sequence counts, repetitions), against the
// model file (size, parameters, the bytes a decode step reads) and against itself (averages of
// its samples); the markdown, JSONL and CSV forms; and the errors. No assertion depends on how
// fast anything ran.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "testing/synth.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using nlohmann::json;

using BenchRun = test::ProgramStreams;

BenchRun run_bench(const std::string& args) { return test::run_program_streams("pagoda-bench", args); }

// The run's JSON array, after checking the program succeeded.
json run_json(const std::string& args) {
  const BenchRun r = run_bench(args + " -o json");
  EXPECT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out, nullptr, false);
  EXPECT_TRUE(j.is_array()) << r.out;
  return j.is_array() ? j : json::array();
}

double mean(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()); }

// What every result must say of itself, whatever the test.
void expect_consistent(const json& t, int reps) {
  const auto samples_ts = t.at("samples_ts").get<std::vector<double>>();
  ASSERT_EQ(samples_ts.size(), size_t(reps));
  ASSERT_EQ(t.at("samples_ns").size(), size_t(reps));
  EXPECT_GT(t.at("avg_ts").get<double>(), 0.0);
  // samples_ts are printed to six significant digits, as llama-bench prints them.
  EXPECT_NEAR(t.at("avg_ts").get<double>(), mean(samples_ts), 1e-5 * mean(samples_ts));
  for (double ts : samples_ts) EXPECT_GT(ts, 0.0);
  EXPECT_EQ(t.at("backends"), "CPU");
  EXPECT_FALSE(t.at("build_commit").get<std::string>().empty());
  EXPECT_EQ(t.at("test_time").get<std::string>().size(), std::string("2026-01-01T00:00:00Z").size());
}

void expect_positive(const json& t, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    ASSERT_TRUE(t.at(name).is_number()) << name << " in " << t.dump();
    EXPECT_GT(t.at(name).get<double>(), 0.0) << name;
  }
}

void expect_null(const json& t, std::initializer_list<const char*> names) {
  for (const char* name : names) EXPECT_TRUE(t.at(name).is_null()) << name << " in " << t.dump();
}

struct FileTotals {
  uint64_t bytes = 0, params = 0, decode_bytes = 0;
};

// The model's tensor bytes and elements, and the weight bytes one decode step reads: all but
// the embedding table, of which one row (the whole table when it is the classifier too).
FileTotals file_totals(const std::string& path) {
  const GgufFile f = GgufFile::open(path);
  FileTotals t;
  const bool tied = f.find_tensor("output.weight") == nullptr;
  for (const GgufTensorInfo& info : f.tensors()) {
    t.bytes += info.n_bytes;
    t.params += info.n_elements;
    const bool row_only = info.name == "token_embd.weight" && !tied;
    t.decode_bytes += row_only ? info.n_bytes / info.shape[1] : info.n_bytes;
  }
  return t;
}

// The bytes a tg row says a token costs (bandwidth over roofline) against the file's weights
// and the f16 KV cache the test's decode steps read on average.
void expect_decode_bytes(const json& t, const FileTotals& file, double mean_positions) {
  const ModelConfig c = test::tiny_gqa_config();
  const double kv = double(c.n_layers) * 2 * c.n_kv_heads * c.head_dim() * 2 * mean_positions;
  const double bytes = t.at("bandwidth_gbs").get<double>() * 1e9 / t.at("roofline_ts").get<double>();
  EXPECT_NEAR(bytes, double(file.decode_bytes) + kv, 1e-4 * bytes);
}

TEST(PagodaBench, JsonHasOneObjectPerTestWithWhatWasAsked) {
  const std::string model = test::tiny_gqa_model();
  const json tests = run_json("-m " + model + " -p 16 -n 8 -r 2 -t 1");
  ASSERT_EQ(tests.size(), 2u) << tests.dump(2);
  const json& pp = tests[0];
  const json& tg = tests[1];
  EXPECT_EQ(pp.at("n_prompt"), 16);
  EXPECT_EQ(pp.at("n_gen"), 0);
  EXPECT_EQ(tg.at("n_prompt"), 0);
  EXPECT_EQ(tg.at("n_gen"), 8);
  const FileTotals file = file_totals(model);
  for (const json& t : tests) {
    expect_consistent(t, 2);
    EXPECT_EQ(t.at("n_depth"), 0);
    EXPECT_EQ(t.at("n_threads"), 1);
    EXPECT_EQ(t.at("n_seqs"), 1);
    EXPECT_EQ(t.at("n_batch"), 2048);
    EXPECT_EQ(t.at("n_ubatch"), 512);
    EXPECT_EQ(t.at("type_k"), "f16");
    EXPECT_EQ(t.at("use_mmap"), true);
    EXPECT_EQ(t.at("model_filename"), model);
    EXPECT_EQ(t.at("model_size").get<uint64_t>(), file.bytes);
    EXPECT_EQ(t.at("model_n_params").get<uint64_t>(), file.params);
    EXPECT_TRUE(t.at("model_type").get<std::string>().starts_with("llama ")) << t.at("model_type");
  }
  expect_positive(pp, {"peak_gflops", "gflops", "peak_fraction"});
  expect_null(pp, {"bandwidth_gbs", "roofline_ts", "roofline_fraction", "s_pp", "s_tg"});
  expect_positive(tg, {"bandwidth_gbs", "roofline_ts", "roofline_fraction"});
  expect_null(tg, {"peak_gflops", "gflops", "peak_fraction", "s_pp", "s_tg"});
  // A one-token prompt, then decode steps at 2..9 positions: 5.5 on average.
  expect_decode_bytes(tg, file, 5.5);
}

TEST(PagodaBench, TiedClassifierIsReadWhole) {
  const std::string model = test::scratch_path("tied.gguf");
  write_synth_model(model, SynthSpec{.config = test::tiny_gqa_config(), .tied_output = true});
  const json tests = run_json("-m " + model + " -p 0 -n 8 -r 1 -t 1");
  ASSERT_EQ(tests.size(), 1u);
  const FileTotals file = file_totals(model);
  EXPECT_EQ(file.decode_bytes, file.bytes);
  expect_decode_bytes(tests[0], file, 5.5);
}

TEST(PagodaBench, BatchedJobsReportEachSequenceCount) {
  const json tests = run_json("-m " + test::tiny_gqa_model() + " -p 16 -n 8 -r 2 -B 1,2");
  ASSERT_EQ(tests.size(), 2u) << tests.dump(2);
  for (size_t i = 0; i < tests.size(); ++i) {
    const json& t = tests[i];
    expect_consistent(t, 2);
    EXPECT_EQ(t.at("n_seqs"), int(i) + 1);
    EXPECT_EQ(t.at("n_prompt"), 16);
    EXPECT_EQ(t.at("n_gen"), 8);
    expect_positive(t, {"s_pp", "s_tg", "bandwidth_gbs", "roofline_ts", "roofline_fraction", "peak_gflops", "gflops"});
  }
}

TEST(PagodaBench, DepthComesFromThePrefixCache) {
  // pagoda-bench exits with an error when a run's prompt did not find its context cached.
  const json tests = run_json("-m " + test::tiny_gqa_model() + " -p 16 -n 8 -r 2 -d 16");
  ASSERT_EQ(tests.size(), 2u) << tests.dump(2);
  for (const json& t : tests) {
    expect_consistent(t, 2);
    EXPECT_EQ(t.at("n_depth"), 16);
  }
  EXPECT_EQ(tests[0].at("n_prompt"), 16);
  EXPECT_EQ(tests[1].at("n_gen"), 8);
  // The context, then decode steps at 17..24 positions.
  expect_decode_bytes(tests[1], file_totals(test::tiny_gqa_model()), 20.5);
}

TEST(PagodaBench, MarkdownIsLlamaBenchsTable) {
  const BenchRun r = run_bench("-m " + test::tiny_gqa_model() + " -p 16 -n 8 -r 1 -d 0,16");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(
      r.out.find("| model                          |       size |     params | backend    | threads |            test |"
                 "                  t/s |"),
      std::string::npos)
      << r.out;
  for (const std::string test : {"pp16", "tg8", "pp16 @ d16", "tg8 @ d16"}) {
    EXPECT_NE(r.out.find(" " + test + " |"), std::string::npos) << test << " in\n" << r.out;
  }
  EXPECT_NE(r.out.find("\nbuild: "), std::string::npos);
  EXPECT_NE(r.err.find("read bandwidth"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("load average at end"), std::string::npos) << r.err;
  // 2 layers × K and V × 2 KV heads × head_dim 8, in 4 and 2 bytes; q8_0 needs rows of 32.
  EXPECT_NE(r.err.find("KV cache per token of context: f32 256, f16 128, bf16 128 bytes\n"), std::string::npos)
      << r.err;
}

TEST(PagodaBench, JsonlAndCsvHaveALinePerTest) {
  const std::string args = "-m " + test::tiny_gqa_model() + " -p 16 -n 8 -r 1";
  const BenchRun jsonl = run_bench(args + " -o jsonl");
  ASSERT_EQ(jsonl.status, 0) << jsonl.err;
  std::istringstream lines(jsonl.out);
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) EXPECT_TRUE(json::accept(line)) << line;
  EXPECT_EQ(n, 2);

  const BenchRun csv = run_bench(args + " -o csv");
  ASSERT_EQ(csv.status, 0) << csv.err;
  std::istringstream rows(csv.out);
  std::string header, row;
  ASSERT_TRUE(std::getline(rows, header));
  EXPECT_TRUE(header.starts_with("build_commit,build_number,cpu_info,")) << header;
  EXPECT_NE(header.find(",n_prompt,n_gen,n_depth,test_time,avg_ns,stddev_ns,avg_ts,stddev_ts,"), std::string::npos);
  int data = 0;
  while (std::getline(rows, row)) data += row.starts_with("\"");
  EXPECT_EQ(data, 2);
}

TEST(PagodaBench, ErrorsSayWhatIsWrongAndExitNonZero) {
  const std::string model = "-m " + test::tiny_gqa_model();
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {model + " --frobnicate", "unknown argument '--frobnicate'"},
      {"-m /nonexistent/model.gguf", "/nonexistent/model.gguf"},
      {"-p 16", "-m MODEL is required"},
      {model + " -p 300 -n 0", "pp300 needs 301 positions"},
      {model + " -p 8 -n 8 -o xml", "-o must be md, json, jsonl or csv"},
      {model + " -ctk f16 -ctv q8_0", "-ctv must equal -ctk"},
      {model + " -p 0 -n 0", "nothing to run"},
  };
  for (const Case& c : cases) {
    const BenchRun r = run_bench(c.args);
    EXPECT_EQ(r.status, 1) << c.args;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << ": " << r.out;
  }
}

}  // namespace
}  // namespace pagoda
