// Faults from outside the engine: files changing under it, memory it cannot get, callbacks
// that throw, readers that never read. Each either works or fails the one request it touches
// with a clear error; none takes the process down or loses a page.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <stdexcept>

#include "testing/lora_synth.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;
using test::await;
using test::expect_engine_idle;
using test::greedy_request;

const std::vector<int32_t> kPrompt = {1, 5, 9, 33, 70, 101, 7};

// The model file replaced on disk (a new file renamed over the path, as deployments do) while
// the engine runs from its mapping: the engine keeps serving the model it loaded.
TEST(Faults, ModelFileReplacedAfterLoading) {
  const std::string path = test::scratch_path("replaced.gguf");
  fs::copy_file(test::tiny_gqa_model(), path);
  Engine engine({.model_path = path, .threads = 2});
  RequestHandle before = engine.submit(greedy_request(kPrompt));
  const std::vector<int32_t> want = await(before).token_ids;

  const std::string other = test::scratch_path("other.gguf");
  {
    std::ofstream junk(other, std::ios::binary);
    junk << std::string(4096, 'x');
  }
  fs::rename(other, path);
  RequestHandle after = engine.submit(greedy_request(kPrompt));
  EXPECT_EQ(await(after).token_ids, want);
  expect_engine_idle(engine);
  EXPECT_THROW(Engine({.model_path = path}), Error) << "the new file is not a model";
}

// An adapter's file deleted after load_adapter: its weights were read at load, so requests on
// it run as before.
TEST(Faults, AdapterFileDeletedWhileLoaded) {
  Engine engine({.model_path = test::tiny_gqa_model(), .threads = 2});
  const std::string adapter = test::scratch_path("deleted-adapter.gguf");
  write_synth_lora(adapter, test::tiny_gqa_config(), {.rank = 4, .alpha = 4.0f, .seed = 3});
  engine.load_adapter("doomed", adapter);
  RequestHandle first = engine.submit(greedy_request(kPrompt, 24, "doomed"));
  const Completion want = await(first);
  ASSERT_EQ(want.finish_reason, FinishReason::Length) << want.error;
  fs::remove(adapter);
  RequestHandle again = engine.submit(greedy_request(kPrompt, 24, "doomed"));
  EXPECT_EQ(await(again).token_ids, want.token_ids);
  expect_engine_idle(engine);
}

// A KV cache larger than the machine can map: the Engine refuses to start, saying why.
TEST(Faults, KvArenaThatCannotBeAllocated) {
  try {
    Engine engine({.model_path = test::tiny_gqa_model(), .kv_pages = 1 << 30});
    FAIL() << "an engine with a KV cache of 2^30 pages started";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KV cache"), std::string::npos) << e.what();
  }
}

// A pull stream nobody reads: the request still finishes, its future resolves and its pages
// come back; the unread events are simply dropped with the handle.
TEST(Faults, PullStreamNeverRead) {
  Engine engine({.model_path = test::tiny_gqa_model(), .threads = 2});
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 8; ++i) {
    Request r = greedy_request(kPrompt, 40);
    r.stream = true;
    handles.push_back(engine.submit(r));
  }
  for (RequestHandle& h : handles) EXPECT_EQ(await(h).token_ids.size(), 40u);
  expect_engine_idle(engine);
  handles.clear();
  RequestHandle after = engine.submit(greedy_request(kPrompt));
  EXPECT_EQ(await(after).finish_reason, FinishReason::Length);
}

// on_token throwing at every stage — the first token, a later one, the final held-back text —
// fails only that request; a request submitted afterwards runs normally.
TEST(Faults, ThrowingCallbackAtEveryStage) {
  Engine engine({.model_path = test::tiny_gqa_model(), .threads = 2});
  RequestHandle clean = engine.submit(greedy_request(kPrompt, 30));
  const std::vector<int32_t> want = await(clean).token_ids;
  for (int throw_at : {1, 2, 10, 30}) {
    Request r = greedy_request(kPrompt, 30);
    auto calls = std::make_shared<int>(0);
    r.on_token = [calls, throw_at](const StreamEvent&) {
      if (++*calls == throw_at) throw std::logic_error("thrown at call " + std::to_string(throw_at));
    };
    RequestHandle h = engine.submit(r);
    const Completion c = await(h);
    EXPECT_EQ(c.finish_reason, FinishReason::Error) << "throw at " << throw_at;
    EXPECT_NE(c.error.find("thrown at call"), std::string::npos) << c.error;
    EXPECT_EQ(*calls, throw_at) << "the callback is not called again after it threw";
  }
  RequestHandle after = engine.submit(greedy_request(kPrompt, 30));
  EXPECT_EQ(await(after).token_ids, want);
  expect_engine_idle(engine);
}

}  // namespace
}  // namespace pagoda
