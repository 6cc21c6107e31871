#pragma once
// Shared test helpers: the ../shared model files and golden outputs, scratch files, and small
// synthetic models written once per test program.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <functional>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "pagoda/engine.h"
#include "pagoda/request.h"

namespace pagoda::test {

// ../shared/<relative>, or "" when that file is absent (a user's clone has no ../shared).
std::string shared_file(const std::string& relative);

// Skips the current test, with the reason printed, when a ../shared file is absent.
#define PAGODA_SHARED_OR_SKIP(var, relative)                     \
  const std::string var = ::pagoda::test::shared_file(relative); \
  if (var.empty()) GTEST_SKIP() << "../shared/" << (relative) << " is absent; skipping"

inline const char* kStoriesGguf = "models/stories260K/stories260K.gguf";
inline const char* kStoriesBin = "models/stories260K/stories260K.bin";
inline const char* kStoriesTokenizer = "models/stories260K/tok512.bin";
inline const char* kGolden = "golden/stories260K_greedy.jsonl";

struct GoldenCase {
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  int32_t max_positions = 0;
  std::vector<int32_t> greedy_ids;
  std::string text;
};
std::vector<GoldenCase> load_golden(const std::string& path);

// Tests on stories260K and its golden outputs: skipped, saying so, when ../shared is absent.
class StoriesTest : public ::testing::Test {
 protected:
  void SetUp() override;
  std::string model_;
  std::vector<GoldenCase> cases_;
};

// max |got - want| / max |want|: logits compared with a tolerance relative to their scale.
double relative_error(const std::vector<float>& got, const std::vector<float>& want);

// The request's completion, waiting with a generous limit so that a bug shows as a failure
// rather than a hung test.
Completion await(RequestHandle& handle);

// A request that cancels itself from its own on_token callback once it has made `tokens`
// tokens: submitted to `engine` on construction, and not to be moved (the callback refers to it).
class SelfCancellingRequest {
 public:
  SelfCancellingRequest(Engine& engine, Request r, int tokens);
  SelfCancellingRequest(const SelfCancellingRequest&) = delete;
  SelfCancellingRequest& operator=(const SelfCancellingRequest&) = delete;
  Completion await() { return test::await(*handle_); }

 private:
  std::atomic<int> seen_{0};
  std::atomic<bool> submitted_{false};
  std::optional<RequestHandle> handle_;
};

// A greedy request for `n` new tokens (EOS ignored) on `adapter` ("" for the base model).
Request greedy_request(const std::vector<int32_t>& prompt, int32_t n = 24, const std::string& adapter = "");

// Expects `fn` to throw pagoda::Error whose message contains `needle`.
void expect_error_containing(const std::function<void()>& fn, const std::string& needle);

// Waits (with a generous limit) until the engine holds no KV page and runs or queues no
// request, then expects its page accounting whole and nothing running or queued.
void expect_engine_idle(const Engine& engine);

// Runs a built example program (PAGODA_BINARY_DIR/examples/<name>) with `args` through the
// shell, stderr merged into the output. `status` is the exit status, or -1 when the program
// did not run or did not exit normally.
struct ProgramRun {
  int status = -1;
  std::string output;
};
std::string program_path(const std::string& name);
ProgramRun run_program(const std::string& name, const std::string& args);

// The same with stdout (the program's results) and stderr (its log, its errors) apart.
struct ProgramStreams {
  int status = -1;
  std::string out;
  std::string err;
};
ProgramStreams run_program_streams(const std::string& name, const std::string& args);

// A fresh path in this test program's scratch folder (removed at exit).
std::string scratch_path(const std::string& name);

// Submits every request at once and waits for all of them, in order.
std::vector<Completion> run_all(Engine& engine, const std::vector<Request>& requests);
// Tokens, text, finish reason and every logprob (and top alternative) bit for bit.
void expect_same_completions(const std::vector<Completion>& got, const std::vector<Completion>& want);

// A file's whole contents ("" when it cannot be read).
std::string read_file(const std::string& path);
// llama.cpp's tokenizer cases (a vocabulary's .inp file): each case followed by
// "\n__ggml_vocab_test__\n".
std::vector<std::string> read_vocab_cases(const std::string& path);
// llama.cpp's ids for those cases (the .out file): one line of space-separated ids per case.
std::vector<std::vector<int32_t>> read_vocab_ids(const std::string& path);

// A random-weight model of `config` (`seed`, SynthSpec's other defaults) in the scratch
// folder as `name`, written by the first call with that name and reused by later ones.
const std::string& synth_model_once(const std::string& name, const ModelConfig& config, uint64_t seed);

// A small random Llama with grouped-query attention (written once per program and reused).
const std::string& tiny_gqa_model();
ModelConfig tiny_gqa_config();

}  // namespace pagoda::test
