// A model or adapter file truncated after it was loaded. With the file mapped (the default),
// the mapping guard turns the SIGBUS of the next read into zeros and a lost flag, and the engine
// fails requests with a clear error instead of dying; with use_mmap off the weights are the
// engine's own and nothing changes. Faults outside guarded mappings still reach the handler
// installed before ours (a sanitizer's, an application's) or the default action.

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <optional>
#include <thread>
#include <vector>

#include "engine/gguf/mapped_file.h"
#include "testing/lora_synth.h"
#include "testing/synth.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;
using test::await;
using test::expect_engine_idle;

const std::vector<int32_t> kPrompt = {1, 5, 9, 33, 70, 101, 7};

Request greedy(int32_t n = 24, const std::string& adapter = "") { return test::greedy_request(kPrompt, n, adapter); }

// A fresh copy of a Q8_0 model (its matrices are packed at load; each step still reads its
// token-embedding rows from the file).
std::string model_copy(const std::string& name) {
  static const std::string original = [] {
    std::string p = test::scratch_path("tiny-q8.gguf");
    write_synth_model(p, SynthSpec{test::tiny_gqa_config(), 7, GgmlType::Q8_0});
    return p;
  }();
  const std::string path = test::scratch_path(name);
  fs::copy_file(original, path, fs::copy_options::overwrite_existing);
  return path;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

void expect_lost_model(const Completion& c, const std::string& path) {
  EXPECT_EQ(c.finish_reason, FinishReason::Error);
  EXPECT_NE(c.error.find("model file " + path + " changed after it was mapped"), std::string::npos) << c.error;
}

// ---- MappedFile and its guard ---------------------------------------------------------------

TEST(MappingGuard, TruncatedMappingReadsZerosAndIsLost) {
  const std::string path = test::scratch_path("guarded.bin");
  const std::string other_path = test::scratch_path("untouched.bin");
  write_bytes(path, std::string(3 * 4096 + 100, 'a'));
  write_bytes(other_path, std::string(5000, 'b'));
  const MappedFile file = MappedFile::open(path);
  const MappedFile other = MappedFile::open(other_path);
  EXPECT_EQ(char(file.bytes()[2 * 4096]), 'a');
  EXPECT_FALSE(file.lost());

  fs::resize_file(path, 0);
  // This read raises SIGBUS; the guard maps zeros over the file and the read runs again.
  EXPECT_EQ(char(file.bytes()[2 * 4096]), '\0');
  EXPECT_TRUE(file.lost());
  EXPECT_EQ(char(file.bytes()[0]), '\0') << "the whole mapping is zeros, not just the faulting page";
  EXPECT_FALSE(other.lost());
  EXPECT_EQ(char(other.bytes()[4999]), 'b');
}

// read() copies the file's bytes (from the file for a mapping, from memory for a copy); once
// the mapped file is shorter than the range, it gives zeros and the file is lost, also after
// the MappedFile is moved.
TEST(MappingGuard, ReadCopiesTheFileAndSeesTruncation) {
  const std::string path = test::scratch_path("read.bin");
  std::string content(3 * 4096 + 100, '\0');
  for (std::size_t i = 0; i < content.size(); ++i) content[i] = char('a' + i % 23);
  write_bytes(path, content);
  for (MappedFile::Load load : {MappedFile::Load::Map, MappedFile::Load::Copy}) {
    const MappedFile file = MappedFile::open(path, load);
    std::vector<std::byte> got(5000);
    file.read(4000, got);
    EXPECT_EQ(std::memcmp(got.data(), content.data() + 4000, got.size()), 0);
    EXPECT_FALSE(file.lost());
  }
  MappedFile file = MappedFile::open(path);
  fs::resize_file(path, 4096);
  std::vector<std::byte> got(200, std::byte{0x55});
  file.read(4000, got);
  EXPECT_EQ(std::memcmp(got.data(), content.data() + 4000, 96), 0) << "the bytes still in the file";
  EXPECT_EQ(std::count(got.begin() + 96, got.end(), std::byte{0}), 104) << "the bytes past its end read as zeros";
  EXPECT_TRUE(file.lost());
  const MappedFile moved = std::move(file);
  EXPECT_TRUE(moved.lost());
}

// Every mapping closed gives its place in the guard's fixed table back, so the hundredth file
// opened is guarded like the first.
TEST(MappingGuard, ClosedMappingsFreeTheirSlots) {
  const std::string path = test::scratch_path("recycled.bin");
  for (int i = 0; i < 200; ++i) {
    write_bytes(path, std::string(8192, 'c'));
    const MappedFile file = MappedFile::open(path);
    fs::resize_file(path, 0);
    ASSERT_EQ(char(file.bytes()[4096]), '\0') << "file " << i;
    ASSERT_TRUE(file.lost()) << "file " << i;
  }
}

TEST(MappingGuard, CopiedFileIgnoresTruncation) {
  const std::string path = test::scratch_path("copied.bin");
  write_bytes(path, std::string(10000, 'd'));
  const MappedFile file = MappedFile::open(path, MappedFile::Load::Copy);
  fs::resize_file(path, 0);
  ASSERT_EQ(file.bytes().size(), 10000u);
  EXPECT_EQ(char(file.bytes()[9999]), 'd');
  EXPECT_FALSE(file.lost());
}

// A SIGBUS outside every guarded mapping — here a mapping of our own, not guarded — still
// ends the process (the default action, or the sanitizer's report under ASan).
TEST(MappingGuardDeathTest, FaultOutsideGuardedMappingsStillKills) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the program has run engines' threads
  const std::string path = test::scratch_path("unguarded.bin");
  const std::string guarded_path = test::scratch_path("guarded-too.bin");
  write_bytes(path, std::string(8192, 'e'));
  write_bytes(guarded_path, std::string(8192, 'f'));
  EXPECT_DEATH(
      {
        const MappedFile guarded = MappedFile::open(guarded_path);  // the handler is installed
        const int fd = ::open(path.c_str(), O_RDONLY);
        auto* raw = static_cast<const volatile char*>(::mmap(nullptr, 8192, PROT_READ, MAP_PRIVATE, fd, 0));
        fs::resize_file(path, 0);
        std::fprintf(stderr, "%c", raw[4096]);
      },
      "");
}

void exit_42(int) { _exit(42); }

// An application's own SIGBUS handler, installed before the guard's, still gets the faults that
// are not ours. Run in a fresh process ("threadsafe" death tests re-execute the program) so
// the application's handler really comes first.
TEST(MappingGuardDeathTest, ChainsToTheHandlerInstalledBefore) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = test::scratch_path("chained.bin");
  const std::string guarded_path = test::scratch_path("chained-guarded.bin");
  write_bytes(path, std::string(8192, 'g'));
  write_bytes(guarded_path, std::string(8192, 'h'));
  EXPECT_EXIT(
      {
        struct sigaction app {};
        app.sa_handler = exit_42;
        sigemptyset(&app.sa_mask);
        sigaction(SIGBUS, &app, nullptr);
        const MappedFile guarded = MappedFile::open(guarded_path);
        const int fd = ::open(path.c_str(), O_RDONLY);
        auto* raw = static_cast<const volatile char*>(::mmap(nullptr, 8192, PROT_READ, MAP_PRIVATE, fd, 0));
        fs::resize_file(path, 0);
        std::fprintf(stderr, "%c", raw[4096]);
      },
      ::testing::ExitedWithCode(42), "");
}

// ---- The engine -----------------------------------------------------------------------------

// greedy(n, adapter) on `engine`, to its end.
Completion generate(Engine& engine, int32_t n = 24, const std::string& adapter = "") {
  RequestHandle h = engine.submit(greedy(n, adapter));
  return await(h);
}

// An on_token callback that holds the decode loop at a request's `at`-th token until opened, so
// that what the test does meanwhile lands between two of the request's steps.
class TokenGate {
 public:
  explicit TokenGate(int at) : at_(at), open_(opened_.get_future().share()) {}
  std::function<void(const StreamEvent&)> callback() {
    return [this, calls = std::make_shared<int>(0)](const StreamEvent&) {
      if (++*calls == at_) {
        reached_.set_value();
        open_.wait();
      }
    };
  }
  void wait_until_held() { reached_.get_future().wait(); }
  void open() { opened_.set_value(); }

 private:
  int at_;
  std::promise<void> reached_, opened_;
  std::shared_future<void> open_;
};

// The model file truncated in place while a request is generating: that request and every one
// after it fail with an error naming the file; the process, the pages and shutdown are fine.
TEST(FaultsMapping, TruncatedModelFailsRequestsNotTheProcess) {
  const std::string path = model_copy("truncated.gguf");
  Engine engine({.model_path = path, .threads = 2});
  const Completion want = generate(engine, 40);
  ASSERT_EQ(want.finish_reason, FinishReason::Length) << want.error;
  EXPECT_EQ(engine.model_lost(), std::nullopt);

  // The running request is held at its fifth token while the file is truncated.
  TokenGate gate(5);
  Request running = greedy(40);
  running.on_token = gate.callback();
  RequestHandle during = engine.submit(running);
  gate.wait_until_held();
  fs::resize_file(path, 0);
  gate.open();

  const Completion failed = await(during);
  expect_lost_model(failed, path);
  EXPECT_EQ(failed.token_ids.size(), 5u) << "the tokens made before the truncation are kept";
  EXPECT_EQ(std::vector<int32_t>(want.token_ids.begin(), want.token_ids.begin() + 5), failed.token_ids);

  for (int i = 0; i < 3; ++i) {
    expect_lost_model(generate(engine), path);
  }
  ASSERT_TRUE(engine.model_lost().has_value());
  EXPECT_NE(engine.model_lost()->find(path), std::string::npos) << *engine.model_lost();
  expect_engine_idle(engine);
  engine.shutdown();
  EXPECT_THROW(engine.submit(greedy()), Error);
  EXPECT_THROW(Engine({.model_path = path}), Error) << "the truncated file is no model";
}

// A llama2.c checkpoint is mapped and guarded the same way.
TEST(FaultsMapping, TruncatedLlama2cCheckpointFailsRequests) {
  PAGODA_SHARED_OR_SKIP(checkpoint, test::kStoriesBin);
  PAGODA_SHARED_OR_SKIP(tokenizer, test::kStoriesTokenizer);
  const std::string path = test::scratch_path("stories.bin");
  fs::copy_file(checkpoint, path, fs::copy_options::overwrite_existing);
  Engine engine({.model_path = path, .tokenizer_path = tokenizer, .threads = 2});
  ASSERT_EQ(generate(engine, 16).finish_reason, FinishReason::Length);
  fs::resize_file(path, 0);
  expect_lost_model(generate(engine, 16), path);
  expect_engine_idle(engine);
}

// Many requests in flight at once when the file goes (the first one's callback holds the
// decode loop at its first token meanwhile, so none can have finished): every future resolves
// with the error and every page comes back.
TEST(FaultsMapping, EveryRequestInFlightResolves) {
  const std::string path = model_copy("truncated-busy.gguf");
  Engine engine({.model_path = path, .threads = 2, .kv_pages = 64, .tokens_per_page = 8});
  TokenGate gate(1);
  Request first = greedy(200);
  first.on_token = gate.callback();
  std::vector<RequestHandle> handles;
  handles.push_back(engine.submit(first));
  for (int i = 1; i < 16; ++i) handles.push_back(engine.submit(greedy(200)));
  gate.wait_until_held();
  fs::resize_file(path, 0);
  gate.open();
  for (RequestHandle& h : handles) expect_lost_model(await(h), path);
  expect_engine_idle(engine);
  EXPECT_EQ(engine.metrics().finished, 16);
}

// use_mmap off (--no-mmap): the weights were read into the engine's memory, so the truncated
// file changes nothing.
TEST(FaultsMapping, NoMmapKeepsWorkingAfterTruncation) {
  const std::string path = model_copy("copied.gguf");
  Engine engine({.model_path = path, .use_mmap = false, .threads = 2});
  const Completion want = generate(engine, 40);
  ASSERT_EQ(want.finish_reason, FinishReason::Length) << want.error;
  fs::resize_file(path, 0);
  const Completion got = generate(engine, 40);
  EXPECT_EQ(got.finish_reason, FinishReason::Length) << got.error;
  EXPECT_EQ(got.token_ids, want.token_ids);
  expect_engine_idle(engine);

  // And the same tokens as the mapped engine gives on the intact file.
  Engine mapped({.model_path = model_copy("mapped.gguf"), .threads = 2});
  EXPECT_EQ(generate(mapped, 40).token_ids, want.token_ids);
}

// Repacked matrices give their mapped pages back to the OS (they are read again from the file
// if needed), and with use_mmap off the engine frees its copy's bytes of them too (it is their
// only reader), but never the tied token embedding's, which embed() reads on. use_mmap on or
// off, the same tokens: tied F32 and Q8_0 GGUFs, an untied Q4_K_M one (K-quant rows need 256
// columns) and a llama2.c checkpoint.
TEST(FaultsMapping, NoMmapMatchesMmap) {
  std::vector<EngineConfig> configs;
  auto synth = [&](const std::string& name, ModelConfig shape, bool tied, std::optional<QuantPreset> quant) {
    SynthSpec spec{shape, 11};
    spec.tied_output = tied;
    spec.quant = quant;
    const std::string path = test::scratch_path(name);
    write_synth_model(path, spec);
    configs.push_back({.model_path = path, .threads = 2});
  };
  ModelConfig wide = test::tiny_gqa_config();
  wide.dim = 256, wide.ffn_dim = 512;
  synth("tied-f32.gguf", test::tiny_gqa_config(), true, std::nullopt);
  synth("tied-q8_0.gguf", test::tiny_gqa_config(), true, QuantPreset::Q8_0);
  synth("untied-q4_k_m.gguf", wide, false, QuantPreset::Q4_K_M);
  if (const std::string bin = test::shared_file(test::kStoriesBin); !bin.empty()) {
    configs.push_back({.model_path = bin, .tokenizer_path = test::shared_file(test::kStoriesTokenizer), .threads = 2});
  } else {
    std::printf("../shared/%s is absent: the llama2.c case is skipped\n", test::kStoriesBin);
  }
  for (EngineConfig config : configs) {
    Engine mapped(config);
    const Completion want = generate(mapped, 40);
    ASSERT_EQ(want.finish_reason, FinishReason::Length) << want.error;
    config.use_mmap = false;
    Engine copied(config);
    EXPECT_EQ(generate(copied, 40).token_ids, want.token_ids) << config.model_path;
  }
}

// A new file renamed over the path, as deployments replace models: the mapping keeps the old
// inode, so the engine serves the model it loaded, bit for bit.
TEST(FaultsMapping, ModelReplacedByRenameKeepsWorking) {
  const std::string path = model_copy("renamed.gguf");
  Engine engine({.model_path = path, .threads = 2});
  const Completion want = generate(engine, 40);
  ASSERT_EQ(want.finish_reason, FinishReason::Length) << want.error;
  const std::string other = test::scratch_path("renamed-new.gguf");
  write_bytes(other, std::string(4096, 'x'));
  fs::rename(other, path);
  const Completion got = generate(engine, 40);
  EXPECT_EQ(got.finish_reason, FinishReason::Length) << got.error;
  EXPECT_EQ(got.token_ids, want.token_ids);
  expect_engine_idle(engine);
}

// An adapter's weights are copied out of its file at load_adapter, so truncating the file
// afterwards changes nothing, and the base model is untouched.
TEST(FaultsMapping, AdapterTruncatedAfterLoadKeepsWorking) {
  const std::string path = model_copy("adapter-base.gguf");
  Engine engine({.model_path = path, .threads = 2});
  const std::string adapter = test::scratch_path("truncated-adapter.gguf");
  write_synth_lora(adapter, test::tiny_gqa_config(), {.rank = 4, .alpha = 4.0f, .seed = 3});
  engine.load_adapter("cut", adapter);
  const Completion want = generate(engine, 24, "cut");
  ASSERT_EQ(want.finish_reason, FinishReason::Length) << want.error;
  fs::resize_file(adapter, 0);
  const Completion got = generate(engine, 24, "cut");
  EXPECT_EQ(got.finish_reason, FinishReason::Length) << got.error;
  EXPECT_EQ(got.token_ids, want.token_ids);
  EXPECT_THROW(engine.load_adapter("cut-again", adapter), Error) << "the truncated file is no adapter";
  expect_engine_idle(engine);
}

}  // namespace
}  // namespace pagoda
