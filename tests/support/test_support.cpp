#include "support/test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "pagoda/error.h"
#include "testing/synth.h"

namespace pagoda::test {

namespace fs = std::filesystem;

std::string shared_file(const std::string& relative) {
  const fs::path path = fs::path(PAGODA_SHARED_DIR) / relative;
  return fs::exists(path) ? path.string() : std::string();
}

std::vector<GoldenCase> load_golden(const std::string& path) {
  std::ifstream in(path);
  std::vector<GoldenCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    cases.push_back({j.at("prompt").get<std::string>(), j.at("prompt_ids").get<std::vector<int32_t>>(),
                     j.at("max_positions").get<int32_t>(), j.at("greedy_ids").get<std::vector<int32_t>>(),
                     j.at("text").get<std::string>()});
  }
  return cases;
}

void StoriesTest::SetUp() {
  model_ = shared_file(kStoriesGguf);
  const std::string golden = shared_file(kGolden);
  if (model_.empty() || golden.empty()) GTEST_SKIP() << "../shared (stories260K and its golden outputs) is absent";
  cases_ = load_golden(golden);
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double max_diff = 0.0, max_ref = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    max_diff = std::max(max_diff, double(std::abs(got[i] - want[i])));
    max_ref = std::max(max_ref, double(std::abs(want[i])));
  }
  return max_diff / max_ref;
}

std::string program_path(const std::string& name) { return std::string(PAGODA_BINARY_DIR) + "/examples/" + name; }

namespace {

// Runs `command` through the shell into `out`; the exit status, or -1.
int run_shell(const std::string& command, std::string& out) {
  FILE* p = popen(command.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = pclose(p);
  return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

ProgramRun run_program(const std::string& name, const std::string& args) {
  ProgramRun r;
  r.status = run_shell(program_path(name) + " " + args + " 2>&1", r.output);
  return r;
}

ProgramStreams run_program_streams(const std::string& name, const std::string& args) {
  static std::atomic<int> runs{0};
  const std::string err_path = scratch_path(name + "-stderr-" + std::to_string(runs++));
  ProgramStreams r;
  r.status = run_shell(program_path(name) + " " + args + " 2>" + err_path, r.out);
  std::stringstream err;
  err << std::ifstream(err_path).rdbuf();
  r.err = err.str();
  return r;
}

Completion await(RequestHandle& handle) {
  if (handle.future().wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
    ADD_FAILURE() << "request " << handle.id() << " never resolved";
    return {};
  }
  return handle.get();
}

SelfCancellingRequest::SelfCancellingRequest(Engine& engine, Request r, int tokens) {
  r.on_token = [this, tokens](const StreamEvent&) {
    if (++seen_ != tokens) return;
    while (!submitted_.load()) std::this_thread::yield();  // the handle is on its way back from submit
    handle_->cancel();
  };
  handle_.emplace(engine.submit(std::move(r)));
  submitted_ = true;
}

Request greedy_request(const std::vector<int32_t>& prompt, int32_t n, const std::string& adapter) {
  Request r;
  r.prompt_ids = prompt;
  r.sampling.temperature = 0.0f;
  r.max_new_tokens = n;
  r.ignore_eos = true;
  r.adapter = adapter;
  return r;
}

void expect_engine_idle(const Engine& engine) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  // Pages, and for an encoder (which holds none) the requests themselves, settle after the
  // futures resolve: a cancelled request retires on the scheduler's next look.
  auto busy = [&] {
    const EngineMetrics m = engine.metrics();
    return m.kv_pages_used != 0 || m.running != 0 || m.queued != 0;
  };
  while (busy() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const EngineMetrics m = engine.metrics();
  EXPECT_EQ(m.kv_pages_used, 0);
  EXPECT_EQ(m.kv_pages_free + m.kv_pages_cached, m.kv_pages_total);
  EXPECT_EQ(m.running, 0);
  EXPECT_EQ(m.queued, 0);
}

namespace {

struct ScratchDir {
  fs::path path;
  ScratchDir() {
    path = fs::temp_directory_path() / ("pagoda-test-" + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

}  // namespace

std::string scratch_path(const std::string& name) {
  static ScratchDir dir;
  return (dir.path / name).string();
}

const std::string& synth_model_once(const std::string& name, const ModelConfig& config, uint64_t seed) {
  static std::mutex mutex;
  static std::map<std::string, std::string> written;  // name → path; a map's values stay put
  const std::lock_guard lock(mutex);
  auto [it, first] = written.try_emplace(name, scratch_path(name));
  if (first) write_synth_model(it->second, SynthSpec{config, seed});
  return it->second;
}

ModelConfig tiny_gqa_config() {
  ModelConfig c;
  c.dim = 64, c.n_layers = 2, c.n_heads = 8, c.n_kv_heads = 2, c.ffn_dim = 160;
  c.vocab_size = 1000, c.context_length = 256;
  return c;
}

const std::string& tiny_gqa_model() { return synth_model_once("tiny-gqa.gguf", tiny_gqa_config(), 7); }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> read_vocab_cases(const std::string& path) {
  const std::string text = read_file(path), sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> cases;
  size_t from = 0;
  for (size_t hit; (hit = text.find(sep, from)) != std::string::npos; from = hit + sep.size()) {
    cases.push_back(text.substr(from, hit - from));
  }
  return cases;
}

std::vector<std::vector<int32_t>> read_vocab_ids(const std::string& path) {
  std::vector<std::vector<int32_t>> out;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);) {
    std::istringstream ids(line);
    out.emplace_back();
    for (int32_t id; ids >> id;) out.back().push_back(id);
  }
  return out;
}

std::vector<Completion> run_all(Engine& engine, const std::vector<Request>& requests) {
  std::vector<RequestHandle> handles;
  for (const Request& r : requests) handles.push_back(engine.submit(r));
  std::vector<Completion> out;
  for (RequestHandle& h : handles) out.push_back(await(h));
  return out;
}

void expect_same_completions(const std::vector<Completion>& got, const std::vector<Completion>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(got[i].token_ids, want[i].token_ids);
    EXPECT_EQ(got[i].text, want[i].text);
    EXPECT_EQ(got[i].finish_reason, want[i].finish_reason);
    ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size());
    for (size_t t = 0; t < got[i].logprobs.size(); ++t) {
      EXPECT_EQ(got[i].logprobs[t].logprob, want[i].logprobs[t].logprob) << "token " << t;
      ASSERT_EQ(got[i].logprobs[t].top.size(), want[i].logprobs[t].top.size());
      for (size_t k = 0; k < got[i].logprobs[t].top.size(); ++k) {
        EXPECT_EQ(got[i].logprobs[t].top[k].token, want[i].logprobs[t].top[k].token);
        EXPECT_EQ(got[i].logprobs[t].top[k].logprob, want[i].logprobs[t].top[k].logprob);
      }
    }
  }
}

void expect_error_containing(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no pagoda::Error; expected one saying \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace pagoda::test
