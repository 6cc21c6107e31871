// The prefix cache's disk tier (EngineConfig::kv_disk_path) end to end: prefixes the RAM pool
// evicted, or that an earlier engine computed, are read back instead of computed, and tokens
// and logprobs stay bit for bit those of an engine that computes everything; another model or
// KV type never matches; damaged files are dropped and recomputed; two engines share a
// directory; shutdown with reads and writes in flight resolves every future and frees every
// page; a writer killed mid-way (kill -9) leaves nothing a restart cannot handle; the files stay
// within their budget; an unusable directory is refused at start.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Conversations of 60-token openings, each asked twice with different endings: more prompt
// than the small pool below holds at once.
std::vector<Request> conversation_requests(uint32_t seed, int conversations) {
  std::mt19937 rng(seed);
  std::vector<Request> out;
  for (int c = 0; c < conversations; ++c) {
    std::vector<int32_t> opening;
    for (int i = 0; i < 60; ++i) opening.push_back(int32_t(3 + rng() % 990));
    for (int turn = 0; turn < 2; ++turn) {
      Request r = test::greedy_request(opening, 6);
      for (int i = 0; i < 5; ++i) r.prompt_ids.push_back(int32_t(3 + rng() % 990));
      r.logprobs = 2;
      out.push_back(std::move(r));
    }
  }
  return out;
}

EngineConfig disk_config(const std::string& dir, const std::string& model = test::tiny_gqa_model()) {
  EngineConfig c;
  c.model_path = model;
  c.threads = 1;
  c.kv_pages = 48;  // 192 positions: about three conversations
  c.tokens_per_page = 4;
  c.max_running = 4;
  c.kv_disk_path = dir;
  c.kv_disk_bytes = size_t(64) << 20;
  return c;
}

// What an engine without any prefix cache answers.
std::vector<Completion> computed_answers(const std::vector<Request>& requests) {
  EngineConfig c = disk_config("");
  c.prefix_caching = false;
  Engine engine(c);
  return test::run_all(engine, requests);
}

// Runs the requests one after the other (so each may find the earlier ones' pages).
std::vector<Completion> run_in_turn(Engine& engine, const std::vector<Request>& requests) {
  std::vector<Completion> out;
  for (const Request& r : requests) out.push_back(test::run_all(engine, {r})[0]);
  return out;
}

// Waits until every page sent to disk is written and the files over budget are gone.
void settle(const Engine& engine) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (engine.metrics().kv_disk_write_backlog > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(engine.metrics().kv_disk_write_backlog, 0);
}

// An empty directory of this name in the scratch folder (gone if an earlier run left one).
std::string fresh_dir(const std::string& name) {
  const std::string dir = test::scratch_path(name);
  fs::remove_all(dir);
  return dir;
}

size_t page_files_in(const fs::path& dir) {
  size_t n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) n += entry.path().extension() == ".kvpage";
  return n;
}

// A new engine on `dir` answers `requests` as computing would, reading from disk, finding no
// file damaged.
void expect_a_new_engine_reads_them_whole(const std::string& dir, const std::vector<Request>& requests,
                                          const std::vector<Completion>& want) {
  Engine engine(disk_config(dir));
  test::expect_same_completions(run_in_turn(engine, requests), want);
  EXPECT_EQ(engine.metrics().kv_disk_damaged, 0);
  EXPECT_GT(engine.metrics().kv_disk_hit_tokens, 0);
}

TEST(DiskTier, EvictedPrefixesComeBackFromDiskWithTheSameTokensAndLogprobs) {
  const std::vector<Request> requests = conversation_requests(3, 6);
  const std::vector<Completion> want = computed_answers(requests);
  const std::string dir = fresh_dir("disk-evicted");
  Engine engine(disk_config(dir));
  test::expect_same_completions(run_in_turn(engine, requests), want);
  settle(engine);
  EXPECT_GT(engine.metrics().kv_disk_pages, 0);
  EXPECT_EQ(size_t(engine.metrics().kv_disk_pages), page_files_in(dir));
  EXPECT_GT(engine.metrics().kv_disk_written_bytes, 0);
  // Asked again: the early conversations left the pool long ago.
  test::expect_same_completions(run_in_turn(engine, requests), want);
  const EngineMetrics m = engine.metrics();
  EXPECT_GT(m.kv_ram_evictions, 0);
  EXPECT_GT(m.kv_disk_hit_tokens, 0);
  EXPECT_GT(m.kv_disk_read_bytes, 0);
  EXPECT_LE(m.kv_disk_hit_tokens, m.prefix_hit_tokens);
  EXPECT_EQ(m.kv_disk_damaged, 0);
  test::expect_engine_idle(engine);
}

TEST(DiskTier, ARestartedEngineReadsWhatTheLastOneWrote) {
  const std::vector<Request> requests = conversation_requests(5, 3);
  const std::vector<Completion> want = computed_answers(requests);
  const std::string dir = fresh_dir("disk-restart");
  {
    Engine first(disk_config(dir));
    test::expect_same_completions(run_in_turn(first, requests), want);
  }  // shutdown finishes the queued writes
  ASSERT_GT(page_files_in(dir), 0u);
  Engine second(disk_config(dir));
  EXPECT_EQ(size_t(second.metrics().kv_disk_pages), page_files_in(dir));
  test::expect_same_completions(run_in_turn(second, requests), want);
  const EngineMetrics m = second.metrics();
  EXPECT_GT(m.kv_disk_hit_tokens, 0);
  // The first request had nothing in RAM: its hit came from disk whole.
  EXPECT_EQ(m.kv_disk_damaged, 0);
  test::expect_engine_idle(second);
}

TEST(DiskTier, ACopyOfTheModelFileMatchesButAnotherModelOrKvTypeNever) {
  const std::vector<Request> requests = conversation_requests(7, 2);
  const std::string dir = fresh_dir("disk-fingerprint");
  {
    Engine writer(disk_config(dir));
    run_in_turn(writer, requests);
  }
  const size_t files = page_files_in(dir);
  ASSERT_GT(files, 0u);
  {
    ModelConfig other = test::tiny_gqa_config();
    Engine another(disk_config(dir, test::synth_model_once("tiny-gqa-other.gguf", other, 8)));
    run_in_turn(another, requests);
    EXPECT_EQ(another.metrics().kv_disk_hit_tokens, 0);
  }
  {
    EngineConfig c = disk_config(dir);
    c.kv_cache_type = KvCacheType::F32;
    Engine f32(c);
    run_in_turn(f32, requests);
    EXPECT_EQ(f32.metrics().kv_disk_hit_tokens, 0);
  }
  const std::string copy = test::scratch_path("tiny-gqa-copy.gguf");
  fs::copy_file(test::tiny_gqa_model(), copy, fs::copy_options::overwrite_existing);
  Engine same(disk_config(dir, copy));
  test::expect_same_completions(run_in_turn(same, requests), computed_answers(requests));
  EXPECT_GT(same.metrics().kv_disk_hit_tokens, 0);
}

TEST(DiskTier, DamagedFilesAreDroppedAndRecomputedNeverUsed) {
  const std::vector<Request> requests = conversation_requests(11, 3);
  const std::vector<Completion> want = computed_answers(requests);
  const std::string dir = fresh_dir("disk-damaged");
  {
    Engine writer(disk_config(dir));
    run_in_turn(writer, requests);
  }
  // Every file damaged a different way: a flipped byte in the page, in the header, cut short,
  // emptied; plus a torn temporary file of a writer that is gone.
  int i = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const fs::path path = entry.path();
    const auto size = fs::file_size(path);
    switch (i++ % 4) {
      case 0:
      case 1: {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        const auto at = std::streamoff(i % 4 == 1 ? size - 5 : 20);
        f.seekg(at);
        const char c = char(f.get());
        f.seekp(at);
        f.put(char(c ^ 1));
        break;
      }
      case 2: fs::resize_file(path, size / 2); break;
      default: fs::resize_file(path, 0);
    }
  }
  std::ofstream(fs::path(dir) / ".tmp-2147483646-0-torn.kvpage") << "half a page";
  Engine reader(disk_config(dir));
  test::expect_same_completions(run_in_turn(reader, requests), want);
  const EngineMetrics m = reader.metrics();
  EXPECT_GT(m.kv_disk_damaged, 1) << "the torn temporary and at least one damaged page";
  EXPECT_FALSE(fs::exists(fs::path(dir) / ".tmp-2147483646-0-torn.kvpage"));
  test::expect_engine_idle(reader);
  // The damaged files were replaced by good ones: a third engine reads them all.
  reader.shutdown();
  expect_a_new_engine_reads_them_whole(dir, requests, want);
}

TEST(DiskTier, TwoEnginesSharingADirectoryKeepEachOthersFilesWhole) {
  const std::vector<Request> requests = conversation_requests(13, 4);
  const std::vector<Completion> want = computed_answers(requests);
  const std::string dir = fresh_dir("disk-shared");
  Engine a(disk_config(dir)), b(disk_config(dir));
  std::vector<Completion> got_a, got_b;
  std::thread ta([&] {
    for (int round = 0; round < 2; ++round) got_a = run_in_turn(a, requests);
  });
  std::thread tb([&] {
    for (int round = 0; round < 2; ++round) got_b = run_in_turn(b, requests);
  });
  ta.join();
  tb.join();
  test::expect_same_completions(got_a, want);
  test::expect_same_completions(got_b, want);
  EXPECT_EQ(a.metrics().kv_disk_damaged, 0);
  EXPECT_EQ(b.metrics().kv_disk_damaged, 0);
  a.shutdown();
  b.shutdown();
  expect_a_new_engine_reads_them_whole(dir, requests, want);
}

TEST(DiskTier, ShutdownWithReadsAndWritesInFlightResolvesEveryFutureAndFreesEveryPage) {
  const std::vector<Request> requests = conversation_requests(17, 8);
  const std::string dir = fresh_dir("disk-shutdown");
  {
    Engine writer(disk_config(dir));
    run_in_turn(writer, requests);
  }
  for (auto wait : {0ms, 2ms, 10ms}) {
    Engine engine(disk_config(dir));
    std::vector<RequestHandle> handles;
    for (const Request& r : requests) handles.push_back(engine.submit(r));
    std::this_thread::sleep_for(wait);
    engine.shutdown();
    for (RequestHandle& h : handles) {
      const Completion c = test::await(h);
      EXPECT_TRUE(c.finish_reason == FinishReason::Cancelled || c.finish_reason == FinishReason::Length) << c.error;
    }
    const EngineMetrics m = engine.metrics();
    EXPECT_EQ(m.kv_pages_used, 0);
    EXPECT_EQ(m.kv_pages_free + m.kv_pages_cached, m.kv_pages_total);
  }
}

size_t temporaries_in(const fs::path& dir) {
  size_t n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) n += entry.path().filename().string().starts_with(".tmp-");
  return n;
}

TEST(DiskTier, AWriterKilledMidWayLeavesNothingARestartCannotHandle) {
  const std::string dir = fresh_dir("disk-killed");
  const std::string prompts = test::scratch_path("disk-killed-prompts.jsonl");
  std::vector<Request> requests;
  {
    std::ofstream out(prompts);
    std::mt19937 rng(31);
    for (int i = 0; i < 48; ++i) {
      std::string text;
      for (int w = 0; w < 60; ++w) text += std::string(1, char('a' + rng() % 26)) + char('a' + rng() % 26) + ' ';
      out << R"({"prompt": ")" << text << R"(", "max_tokens": 48})"
          << "\n";
      Request r;
      r.prompt = text;
      r.max_new_tokens = 48;
      r.sampling.temperature = 0.0f;
      requests.push_back(std::move(r));
    }
  }
  // pagoda-generate writes pages for all its prompts at once; it is killed once some are on disk.
  const std::string program = test::program_path("pagoda-generate");
  std::vector<std::string> args = {
      program, "-m", test::tiny_gqa_model(), "--prompts", prompts, "--temp", "0", "-t", "1", "--kv-disk", dir};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t quiet;
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&quiet, 2, "/dev/null", O_WRONLY, 0);
  pid_t writer = 0;
  ASSERT_EQ(posix_spawn(&writer, program.c_str(), &quiet, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&quiet);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while ((!fs::exists(dir) || page_files_in(dir) < 24) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  kill(writer, SIGKILL);
  int status = 0;
  waitpid(writer, &status, 0);
  ASSERT_GE(page_files_in(dir), 24u) << "the writer never wrote";
  EXPECT_TRUE(WIFSIGNALED(status)) << "the writer finished before it could be killed";
  const size_t torn = temporaries_in(dir);

  EngineConfig c;
  c.model_path = test::tiny_gqa_model();
  c.threads = 1;
  c.kv_disk_path = dir;
  std::vector<Completion> want;
  {
    EngineConfig plain = c;
    plain.kv_disk_path.clear();
    plain.prefix_caching = false;
    Engine engine(plain);
    want = test::run_all(engine, requests);
  }
  Engine restarted(c);
  EXPECT_EQ(restarted.metrics().kv_disk_damaged, int64_t(torn)) << "every torn write counted";
  EXPECT_EQ(temporaries_in(dir), 0u) << "and dropped";
  test::expect_same_completions(run_in_turn(restarted, requests), want);
  EXPECT_GT(restarted.metrics().kv_disk_hit_tokens, 0) << "what the killed writer finished is used";
  test::expect_engine_idle(restarted);
}

TEST(DiskTier, FilesStayWithinTheirBudget) {
  const std::vector<Request> requests = conversation_requests(19, 6);
  const std::string dir = fresh_dir("disk-budget");
  EngineConfig c = disk_config(dir);
  // A page file of this model: its header, 4 tokens, and 2 layers × 2 (K, V) × 2 KV heads × 4
  // tokens × 8 dims × 2 bytes.
  const size_t file = 96 + 4 * 4 + 2 * 2 * 2 * 4 * 8 * 2;
  c.kv_disk_bytes = 20 * file;
  Engine engine(c);
  run_in_turn(engine, requests);
  settle(engine);
  const EngineMetrics m = engine.metrics();
  EXPECT_GT(m.kv_disk_evictions, 0);
  EXPECT_LE(m.kv_disk_bytes, int64_t(c.kv_disk_bytes));
  EXPECT_EQ(m.kv_disk_pages, 20);
  // The removals are the disk-tier actor's to do; they follow soon after.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (page_files_in(dir) > 20 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(page_files_in(dir), 20u);
}

TEST(DiskTier, AnUnusableDirectoryOrATooSmallBudgetIsRefusedAtStart) {
  test::expect_error_containing([] { Engine e(disk_config("/proc/self/no-such-dir")); }, "KV disk tier");
  const std::string file = test::scratch_path("disk-not-a-dir");
  std::ofstream(file) << "x";
  test::expect_error_containing([&] { Engine e(disk_config(file)); }, "KV disk tier");
  EngineConfig c = disk_config(fresh_dir("disk-tiny-budget"));
  c.kv_disk_bytes = 100;
  test::expect_error_containing([&] { Engine e(c); }, "too small for one KV page");
}

}  // namespace
}  // namespace pagoda
