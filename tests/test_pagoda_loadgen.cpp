// pagoda-loadgen as people run it, on a tiny synthetic model: --agent's conversations resend
// their whole context each turn, find the earlier turns in a prefix cache large enough to keep
// them, and lose them when the interleaved turns outgrow the pool; the report's tables and JSON;
// --kv-disk-compare's two runs and its directories; requests with images (--mmproj, --image);
// the flag errors. No assertion depends on how fast anything ran.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "support/test_support.h"
#include "support/vision_models.h"

namespace pagoda {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr int kTokensPerPage = 16;

// 3 conversations of 3 turns to 192 positions, 8-token replies: 55-token messages.
constexpr int kConversations = 3, kTurns = 3, kOutputLen = 8, kMessageLen = (192 - 1 - kTurns * kOutputLen) / kTurns;
const std::string kAgent = "--agent 3:3:192 --output-len 8";

test::ProgramStreams run_loadgen(const std::string& args, const std::string& model = test::tiny_gqa_model()) {
  return test::run_program_streams("pagoda-loadgen", "-m " + model + " -t 1 " + args);
}

// The run's JSON report, after checking the program succeeded.
json run_json(const std::string& args, const std::string& name, const std::string& model = test::tiny_gqa_model()) {
  const std::string path = test::scratch_path(name + ".json");
  const test::ProgramStreams r = run_loadgen(args + " --json " + path, model);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  const json j = json::parse(test::read_file(path), nullptr, false);
  EXPECT_TRUE(j.is_object()) << r.out;
  return j.is_object() ? j : json::object();
}

// Turn k's prompt (from 1): BOS, k messages and the k - 1 replies before it.
int prompt_len(int turn) { return 1 + turn * kMessageLen + (turn - 1) * kOutputLen; }

// The prompt tokens a cache that kept everything holds for turns after the first: the full
// pages of the turn before's prompt (its reply's pages may be cached too).
int64_t cacheable_prompt_tokens() {
  int64_t tokens = 0;
  for (int turn = 2; turn <= kTurns; ++turn) tokens += prompt_len(turn - 1) / kTokensPerPage * kTokensPerPage;
  return kConversations * tokens;
}

void expect_percentiles(const json& p) {
  for (const char* q : {"p50", "p90", "p95", "p99"}) ASSERT_TRUE(p.at(q).is_number()) << q << " in " << p.dump();
  EXPECT_LE(p.at("p50").get<double>(), p.at("p95").get<double>());
  EXPECT_LE(p.at("p95").get<double>(), p.at("p99").get<double>());
}

TEST(PagodaLoadgen, AgentTurnsResendTheirContextAndFindItCached) {
  // 64 pages hold every conversation's context (3 x 12 pages).
  const json j = run_json(kAgent + " -c 2 --kv-pages 64", "agent");
  const json& agent = j.at("workload").at("agent");
  EXPECT_EQ(agent.at("conversations"), kConversations);
  EXPECT_EQ(agent.at("turns"), kTurns);
  EXPECT_EQ(agent.at("context"), 192);
  EXPECT_EQ(agent.at("message_len"), kMessageLen);
  EXPECT_LT(agent.at("contexts_over_kv_pool").get<double>(), 1.0);
  EXPECT_EQ(j.at("workload").at("output_len"), "8:8");

  const json& run = j.at("runs").at("continuous");
  EXPECT_EQ(run.at("failed"), 0);
  EXPECT_EQ(run.at("requests"), kConversations * kTurns);
  EXPECT_EQ(run.at("later_turns").at("requests"), kConversations * (kTurns - 1));
  EXPECT_EQ(run.at("generated_tokens"), kConversations * kTurns * kOutputLen);
  EXPECT_EQ(run.at("prompt_tokens"), kConversations * (prompt_len(1) + prompt_len(2) + prompt_len(3)));
  expect_percentiles(run.at("ttft_ms"));
  expect_percentiles(run.at("later_turns").at("ttft_ms"));
  EXPECT_EQ(run.at("ttft_p50_by_turn_ms").size(), size_t(kTurns));
  EXPECT_GT(run.at("all_tokens_per_s").get<double>(), run.at("tokens_per_s").get<double>());
  EXPECT_GE(run.at("prefix_hit_tokens").get<int64_t>(), cacheable_prompt_tokens());
  EXPECT_EQ(run.at("kv_tiers").at("disk_on"), false);
  EXPECT_TRUE(run.at("load_average").is_number());
  EXPECT_TRUE(j.at("load_average_at_start").is_number());
}

TEST(PagodaLoadgen, TheReportHasTheLaterTurnsTable) {
  const test::ProgramStreams r = run_loadgen(kAgent + " -c 2 --kv-pages 64");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* line : {"agent     3 conversations x 3 turns, interleaved; messages of 55 tokens, replies of 8",
                           "\nturns >= 2\n", "\nTTFT p50 by turn (ms)\n", "\nTTFT p95 (ms) ", "\nprefix hit tokens ",
                           "\nprompt+gen (tok/s) ", "\nload average (end) "}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << " in\n" << r.out;
  }
  // Nothing was evicted and there is no disk tier: no tiers table.
  EXPECT_EQ(r.out.find("prefix cache tiers"), std::string::npos) << r.out;
}

TEST(PagodaLoadgen, InterleavedTurnsOutgrowAPoolThatSequentialTurnsDoNot) {
  // One client, a pool of one conversation's pages: conversations that keep their client find
  // each turn cached; taking turns in between, the others' contexts push them out.
  const std::string pool = " -c 1 --kv-pages 13";
  const json agent = run_json(kAgent + pool, "interleaved");
  const json sequential = run_json("--requests 3 --turns 3 --prompt-len 55 --output-len 8" + pool, "sequential");
  EXPECT_GT(agent.at("workload").at("agent").at("contexts_over_kv_pool").get<double>(), 1.0);
  const json& a = agent.at("runs").at("continuous");
  const json& s = sequential.at("runs").at("continuous");
  EXPECT_EQ(a.at("prompt_tokens"), s.at("prompt_tokens"));  // the same conversations
  EXPECT_GE(s.at("prefix_hit_tokens").get<int64_t>(), cacheable_prompt_tokens());
  EXPECT_LT(a.at("prefix_hit_tokens").get<int64_t>(), s.at("prefix_hit_tokens").get<int64_t>());
}

// Sets an environment variable for the scope, as the programs it runs see it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(PagodaLoadgen, DiskCompareRunsWithoutThenWithTheDiskTier) {
  const std::string tmp = test::scratch_path("tmpdir");
  fs::create_directories(tmp);
  const ScopedEnv tmpdir("TMPDIR", tmp);
  const json j = run_json(kAgent + " -c 2 --kv-disk-compare --kv-disk-size 64M", "compare");
  EXPECT_TRUE(fs::is_empty(tmp)) << "the fresh directory was left in " << tmp;
  EXPECT_EQ(j.at("engine").at("kv_disk").at("bytes"), 64 << 20);
  EXPECT_EQ(j.at("engine").at("kv_disk").at("compare"), true);
  EXPECT_EQ(j.at("runs").at("disk off").at("kv_tiers").at("disk_on"), false);
  EXPECT_EQ(j.at("runs").at("disk on").at("kv_tiers").at("disk_on"), true);
  for (const char* run : {"disk off", "disk on"}) {
    EXPECT_EQ(j.at("runs").at(run).at("requests"), kConversations * kTurns) << run;
    EXPECT_EQ(j.at("runs").at(run).at("failed"), 0) << run;
  }
  const json& ratio = j.at("disk_on_over_off");
  for (const char* field : {"throughput", "ttft_p50_lower", "later_turns_ttft_p50_lower"}) {
    EXPECT_GT(ratio.at(field).get<double>(), 0.0) << field;
  }

  // A directory the user gives stays, and the report shows the tiers.
  const std::string dir = test::scratch_path("kv-disk");
  const test::ProgramStreams r = run_loadgen(kAgent + " -c 2 --kv-disk " + dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_NE(r.out.find("\nprefix cache tiers\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\ndisk tier                         on\n"), std::string::npos) << r.out;
}

// Every request carries an image (two files, taken in turn): the report covers them, and counts
// each image's 16 rows as prompt tokens, in the figures and in the KV pool it sizes.
TEST(PagodaLoadgen, ImageRequestsCountTheImagesRowsAsPromptTokens) {
  const test::VisionFiles& llava = test::llava_files();
  const std::string a = test::png_path("loadgen-a.png", 40, 30, 1), b = test::png_path("loadgen-b.png", 30, 70, 2);
  const std::string work = "--requests 4 -c 4 --prompt-len 8 --output-len 4";
  const std::string images = " --mmproj " + llava.mmproj + " --image " + a + " --image " + b;
  const json text = run_json(work, "text-only", llava.model);
  const json with = run_json(work + images, "images", llava.model);
  EXPECT_EQ(with.at("workload").at("images").at("positions"), json::array({16, 16}));
  EXPECT_EQ(with.at("workload").at("images").at("files"), json::array({a, b}));
  const json& run = with.at("runs").at("continuous");
  EXPECT_EQ(run.at("failed"), 0);
  EXPECT_EQ(run.at("requests"), 4);
  EXPECT_EQ(run.at("generated_tokens"), 4 * 4);
  EXPECT_EQ(run.at("prompt_tokens"), text.at("runs").at("continuous").at("prompt_tokens").get<int64_t>() + 4 * 16);
  EXPECT_EQ(run.at("preemptions"), 0);
  expect_percentiles(run.at("ttft_ms"));
  expect_percentiles(run.at("tpot_ms"));
  // Each client's longest request, BOS + an image + 8 + 4 = 29 positions, takes 2 pages.
  EXPECT_EQ(with.at("engine").at("kv_pages"), 4 * 2 + 1);
  EXPECT_EQ(text.at("engine").at("kv_pages"), 4 * 1 + 1);

  const test::ProgramStreams r = run_loadgen(work + images, llava.model);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("2 images (16 to 16 prompt positions each; one a request"), std::string::npos) << r.out;
}

TEST(PagodaLoadgen, FlagErrorsSayWhatIsWrong) {
  const std::pair<std::string, std::string> cases[] = {
      {"--kv-disk-compare --kv-disk-size 12Q", "--kv-disk-size needs a byte count"},
      {"--kv-disk-size 1G", "--kv-disk-size needs --kv-disk or --kv-disk-compare"},
      {"--kv-disk-compare --prefix-cache both", "needs --prefix-cache on"},
      {kAgent + " --turns 2", "--agent sets what --turns would"},
      {"--agent 3:3", "--agent needs C:T:L"},
      {"--agent 3:3:20", "leaves no room for messages"},
      {"--agent 3:3:192 --output-len 4:8", "--agent needs one --output-len"},
      {"--image a.png", "--image needs --mmproj F"},
      {"--mmproj m.gguf --image a.png --mode both", "--image needs the in-process engine"},
      {"--mmproj " + test::llava_files().mmproj + " --image /no/such.png", "/no/such.png: cannot open"},
  };
  for (const auto& [args, message] : cases) {
    const test::ProgramStreams r = run_loadgen(args);
    EXPECT_EQ(r.status, 1) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
  }
}

}  // namespace
}  // namespace pagoda
