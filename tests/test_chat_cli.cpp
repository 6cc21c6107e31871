// pagoda-chat as a person uses it: the real binary on a pseudo-terminal (a prompt, the streamed
// reply, Ctrl-C mid-reply, /stats, /image, /quit), one-shot and piped runs against the golden
// output, images through the chat template as a server client sends them, the errors, and the
// default model. The chat templates themselves are tests/test_chat_template.cpp.
//
// Every wait on the program has a timeout, so a bug fails a test instead of hanging it. No
// assertion depends on timing.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "testing/lora_synth.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "examples/common/default_model.h"
#include "pagoda/engine.h"
#include "support/chat_models.h"
#include "support/test_support.h"
#include "support/vision_models.h"

extern char** environ;

namespace pagoda {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kChat = PAGODA_BINARY_DIR "/examples/pagoda-chat";

// ---------------------------------------------------------------------------------------------
// Running the program

// argv or envp for execve, built before fork (the child may only make async-signal-safe calls).
class CStrings {
 public:
  explicit CStrings(std::vector<std::string> strings) : strings_(std::move(strings)) {
    for (std::string& s : strings_) pointers_.push_back(s.data());
    pointers_.push_back(nullptr);
  }
  CStrings(const CStrings&) = delete;
  CStrings& operator=(const CStrings&) = delete;
  char* const* get() const { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

// This process's environment with `overrides` ("KEY=value") put in.
std::vector<std::string> environment(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const bool overridden = std::any_of(overrides.begin(), overrides.end(), [&](const std::string& o) {
      return entry.compare(0, o.find('=') + 1, o, 0, o.find('=') + 1) == 0;
    });
    if (!overridden) env.push_back(entry);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// Waits for `pid` until `deadline`, calling `drain` in between so its output never fills up.
// Kills it and returns nullopt at the deadline.
template <typename Drain>
std::optional<int> wait_exit(pid_t pid, Clock::time_point deadline, Drain drain) {
  for (;;) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return exit_code(status);
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return std::nullopt;
    }
    drain();
    std::this_thread::sleep_for(1ms);  // not a busy loop once the output has closed
  }
}

// Reads what `fd` has within `wait_ms` into `out`; false once it is closed.
bool read_some(int fd, std::string& out, int wait_ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, wait_ms) <= 0) return true;
  char buf[4096];
  const ssize_t n = read(fd, buf, sizeof buf);
  if (n > 0) out.append(buf, size_t(n));
  return n > 0 || (n < 0 && errno == EINTR);
}

struct RunResult {
  int status = -1;  // -1: killed at the timeout
  std::string out, err;
};

// Runs the program with `args`, stdin from `stdin_path`, stdout and stderr captured.
RunResult run(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
              const std::string& stdin_path = "/dev/null") {
  CStrings argv(args), envp(environment(env));
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    const int in = open(stdin_path.c_str(), O_RDONLY);
    dup2(in, 0), dup2(out[1], 1), dup2(err[1], 2);
    execve(argv.get()[0], argv.get(), envp.get());
    _exit(127);
  }
  close(out[1]), close(err[1]);
  RunResult r;
  bool out_open = true, err_open = true;
  const auto status = wait_exit(pid, Clock::now() + 120s, [&] {
    if (out_open) out_open = read_some(out[0], r.out, 5);
    if (err_open) err_open = read_some(err[0], r.err, 5);
  });
  // It has exited (or been killed), so both pipes reach their end.
  while (out_open) out_open = read_some(out[0], r.out, 100);
  while (err_open) err_open = read_some(err[0], r.err, 100);
  close(out[0]), close(err[0]);
  r.status = status.value_or(-1);
  return r;
}

// The program on a pseudo-terminal, as in a terminal window: stdout and stderr arrive together
// (with the terminal's "\r\n" turned back into "\n"), typed text is echoed, and Ctrl-C (byte
// 0x03) becomes SIGINT for the program.
class PtyProcess {
 public:
  explicit PtyProcess(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    CStrings argv(args), envp(environment(env));
    master_ = posix_openpt(O_RDWR | O_NOCTTY);
    if (master_ < 0 || grantpt(master_) != 0 || unlockpt(master_) != 0) return;
    const std::string slave = ptsname(master_);
    pid_ = fork();
    if (pid_ == 0) {
      setsid();  // a new session, whose controlling terminal the pty becomes when opened
      const int fd = open(slave.c_str(), O_RDWR);
      dup2(fd, 0), dup2(fd, 1), dup2(fd, 2);
      close(master_);
      execve(argv.get()[0], argv.get(), envp.get());
      _exit(127);
    }
  }

  ~PtyProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) close(master_);
  }

  void type(const std::string& text) { ASSERT_EQ(write(master_, text.data(), text.size()), ssize_t(text.size())); }

  // Reads until `needle` appears after what earlier expects matched, and moves past it. `got`,
  // when given, receives the text up to and including the needle. False at the timeout.
  bool expect(const std::string& needle, std::string* got = nullptr, std::chrono::seconds timeout = 60s) {
    return read_until(timeout, [&]() -> bool {
      const size_t at = output_.find(needle, cursor_);
      if (at == std::string::npos) return false;
      if (got) *got = output_.substr(cursor_, at + needle.size() - cursor_);
      cursor_ = at + needle.size();
      return true;
    });
  }

  // Types `line`, then expects each of `replies` in turn and the next prompt.
  bool command(const std::string& line, std::initializer_list<std::string> replies = {}) {
    type(line);
    for (const std::string& reply : replies) {
      if (!expect(reply)) return false;
    }
    return expect("\n> ");
  }

  // Reads until at least `bytes` more have arrived past the last match (without moving past them).
  bool expect_more(size_t bytes) {
    return read_until(60s, [&] { return output_.size() >= cursor_ + bytes; });
  }

  // Running, and not even a zombie yet (WNOWAIT leaves it for wait_exit to collect).
  bool alive() {
    siginfo_t info{};
    return !exited_ && waitid(P_PID, id_t(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
  }

  // The exit code, or nullopt if the program had not exited by the timeout (it is then killed).
  std::optional<int> wait_exit() {
    const auto code = pagoda::wait_exit(pid_, Clock::now() + 60s, [&] { read_once(10); });
    exited_ = true;
    return code;
  }

  const std::string& output() const { return output_; }

 private:
  template <typename Done>
  bool read_until(std::chrono::seconds timeout, Done done) {
    const auto deadline = Clock::now() + timeout;
    while (!done()) {
      if (Clock::now() > deadline || !read_once(50)) return done();
    }
    return true;
  }

  // False once the terminal is closed (the program has exited).
  bool read_once(int wait_ms) {
    std::string chunk;
    const bool open = read_some(master_, chunk, wait_ms);
    for (char c : chunk) {
      if (c != '\r') output_ += c;
    }
    return open;
  }

  int master_ = -1;
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string output_;
  size_t cursor_ = 0;
};

int count_lines(const std::string& text) { return int(std::count(text.begin(), text.end(), '\n')); }

// ---------------------------------------------------------------------------------------------
// The default model's folder

class ScopedEnv {
 public:
  explicit ScopedEnv(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(DefaultModel, LivesInTheXdgCacheElseHomeElseTmp) {
  ScopedEnv xdg("XDG_CACHE_HOME"), home("HOME");
  setenv("XDG_CACHE_HOME", "/somewhere/cache", 1);
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(cli::cache_dir(), "/somewhere/cache/pagoda");
  setenv("XDG_CACHE_HOME", "relative/cache", 1);
  EXPECT_EQ(cli::cache_dir(), "/home/someone/.cache/pagoda") << "the XDG spec ignores a relative path";
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(cli::cache_dir(), "/home/someone/.cache/pagoda");
  unsetenv("HOME");
  EXPECT_EQ(cli::cache_dir(), "/tmp/pagoda-cache");
}

// ---------------------------------------------------------------------------------------------
// The program

// Ctrl-C mid-reply needs a reply that is still streaming when the test has read its start and
// sends the Ctrl-C: the default model (s15m, a few hundred tokens a second here) greedily
// fills its 2048-token context, which takes seconds, while stories260K and the tiny model
// finish a whole reply in milliseconds.
TEST(ChatCli, DefaultModelIsWrittenOnceAndCtrlCStopsAReply) {
  const std::string cache = test::scratch_path("xdg-cache");
  fs::remove_all(cache);  // a first use, also when the test repeats
  const std::vector<std::string> env = {"XDG_CACHE_HOME=" + cache};
  {
    PtyProcess chat({kChat, "--temp", "0", "-n", "-1"}, env);
    ASSERT_TRUE(chat.expect("\n> ", nullptr, 300s)) << chat.output();
    EXPECT_NE(chat.output().find("wrote the default model"), std::string::npos) << chat.output();
    EXPECT_NE(chat.output().find("random weights"), std::string::npos);
    EXPECT_NE(chat.output().find("means nothing"), std::string::npos);
    EXPECT_NE(chat.output().find("-m model.gguf"), std::string::npos) << "it says how to use a real model";

    chat.type("Once upon a time\n");
    ASSERT_TRUE(chat.expect("Once upon a time\n")) << "the terminal echoes the line";
    ASSERT_TRUE(chat.expect_more(8)) << "the reply streams: " << chat.output();
    chat.type("\x03");
    ASSERT_TRUE(chat.expect("[stopped: ")) << chat.output();
    ASSERT_TRUE(chat.expect("\n> ")) << "it prompts again: " << chat.output();
    EXPECT_TRUE(chat.alive());

    chat.type("/stats\n");
    ASSERT_TRUE(chat.expect("ended by cancelled")) << chat.output();
    ASSERT_TRUE(chat.expect("2 messages")) << "the stopped reply stays in the conversation";
    ASSERT_TRUE(chat.expect("\n> "));
    chat.type("/quit\n");
    EXPECT_EQ(chat.wait_exit(), 0) << chat.output();
  }
  EXPECT_TRUE(fs::exists(fs::path(cache) / "pagoda" / "s15m-random.gguf"));

  const RunResult again = run({kChat, "-p", "Once upon a time", "--temp", "0", "-n", "4"}, env);
  EXPECT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(again.err.find("wrote the default model"), std::string::npos) << "the cached model is reused";
  EXPECT_NE(again.err.find("random weights"), std::string::npos) << "and still named as what it is";
  EXPECT_NE(again.err.find("[4 tokens"), std::string::npos) << again.err;

  PtyProcess one_shot({kChat, "-p", "Once upon a time", "--temp", "0", "-n", "-1"}, env);
  ASSERT_TRUE(one_shot.expect("-m model.gguf\n")) << one_shot.output();
  ASSERT_TRUE(one_shot.expect_more(8)) << "the reply streams: " << one_shot.output();
  one_shot.type("\x03");
  ASSERT_TRUE(one_shot.expect("[stopped: ")) << one_shot.output();
  EXPECT_EQ(one_shot.wait_exit(), 130) << "Ctrl-C ends a one-shot run as interrupted";
}

TEST(ChatCli, TinyModelConversationWithCommands) {
  PtyProcess chat({kChat, "-m", test::tiny_gqa_model(), "--temp", "0", "-n", "20"});
  ASSERT_TRUE(chat.expect("\n> ")) << chat.output();
  EXPECT_NE(chat.output().find("plain continuation"), std::string::npos) << chat.output();

  chat.type("hello\n");
  ASSERT_TRUE(chat.expect("hello\n"));
  std::string reply;
  ASSERT_TRUE(chat.expect("\n[20 tokens, time to first token ", &reply)) << chat.output();
  ASSERT_TRUE(chat.expect("tokens/s, prompt ")) << chat.output();
  ASSERT_TRUE(chat.expect("\n> "));

  ASSERT_TRUE(chat.command("/help\n", {"/reset"})) << chat.output();
  ASSERT_TRUE(chat.command("/stats\n",
                           {"last reply: 20 tokens", "2 messages", "engine: 1 requests finished, 20 tokens generated"}))
      << chat.output();
  ASSERT_TRUE(chat.command("/bogus\n", {"unknown command /bogus"})) << chat.output();
  ASSERT_TRUE(chat.command("/reset\n")) << chat.output();
  ASSERT_TRUE(chat.command("/stats\n", {"0 messages"})) << chat.output();

  chat.type("\x03");  // at the prompt: leave
  EXPECT_EQ(chat.wait_exit(), 0) << chat.output();
}

TEST(ChatCli, EndOfInputAtThePromptExits) {
  PtyProcess chat({kChat, "-m", test::tiny_gqa_model()});
  ASSERT_TRUE(chat.expect("\n> ")) << chat.output();
  chat.type("\x04");  // Ctrl-D
  EXPECT_EQ(chat.wait_exit(), 0) << chat.output();
}

class ChatCliStories : public test::StoriesTest {
 protected:
  std::string continuation(size_t i) const { return cases_[i].text.substr(cases_[i].prompt.size()); }
};

// Greedy one-shot output is the golden continuation: llama2.c's positions limit as -n, and
// stories that end early end where llama2.c's do, at the BOS that starts the next one.
TEST_F(ChatCliStories, OneShotGreedyIsTheGoldenContinuation) {
  for (size_t i = 0; i < cases_.size(); ++i) {
    const test::GoldenCase& g = cases_[i];
    if (g.prompt.empty()) continue;  // pagoda-chat refuses an empty prompt
    const int n = g.max_positions - int(g.prompt_ids.size()) + 1;
    const RunResult r = run({kChat, "-m", model_, "-p", g.prompt, "--temp", "0", "-n", std::to_string(n)});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, continuation(i) + "\n") << g.prompt;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("[" + std::to_string(g.greedy_ids.size()) + " tokens"), std::string::npos) << r.err;
  }
}

// --lora: replies run on the adapter, matching pagoda-generate on the same adapter, and differ
// from the base model's.
TEST_F(ChatCliStories, LoraAdapterShapesTheReply) {
  const std::string adapter = test::scratch_path("chat-lora.gguf");
  const Model base = load_model(model_);
  LoraSynthSpec spec;
  spec.rank = 4;
  spec.seed = 3;
  write_synth_lora(adapter, base.config, spec);
  Engine engine({.model_path = model_, .threads = 1});
  engine.load_adapter("story", adapter, 0.8f);
  Request req;
  req.prompt = cases_[0].prompt;
  req.adapter = "story";
  req.sampling.temperature = 0.0f;
  req.max_new_tokens = 40;
  const std::string want = engine.submit(req).get().text;

  const RunResult r = run(
      {kChat, "-m", model_, "--lora", "story=" + adapter + ":0.8", "-p", cases_[0].prompt, "--temp", "0", "-n", "40"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, want + "\n");
  EXPECT_FALSE(continuation(0).starts_with(want)) << "the adapter should change the greedy story";
}

TEST_F(ChatCliStories, PipedPromptIsOneShot) {
  const std::string input = test::scratch_path("prompt.txt");
  std::ofstream(input) << cases_[0].prompt << "\n";
  const RunResult r = run({kChat, "-m", model_, "--temp", "0", "-n", "40"}, {}, input);
  EXPECT_EQ(r.status, 0) << r.err;
  ASSERT_GT(r.out.size(), 20u);
  EXPECT_EQ(r.out.back(), '\n');
  EXPECT_TRUE(continuation(0).starts_with(r.out.substr(0, r.out.size() - 1))) << r.out;
  EXPECT_NE(r.err.find("[40 tokens"), std::string::npos) << r.err;
}

TEST_F(ChatCliStories, InteractiveStreamsRepliesAndKeepsTheConversation) {
  PtyProcess chat({kChat, "-m", model_, "--temp", "0", "-n", "40"});
  ASSERT_TRUE(chat.expect("\n> ")) << chat.output();
  chat.type(cases_[0].prompt + "\n");
  ASSERT_TRUE(chat.expect(cases_[0].prompt + "\n"));
  std::string reply;
  ASSERT_TRUE(chat.expect("\n[40 tokens", &reply)) << chat.output();
  reply.resize(reply.size() - std::string("\n[40 tokens").size());
  EXPECT_GT(reply.size(), 20u);
  EXPECT_TRUE(continuation(0).starts_with(reply)) << "greedy: the golden story's start: " << reply;
  ASSERT_TRUE(chat.expect("\n> "));

  ASSERT_TRUE(chat.command("Then Lily\n", {"tokens/s"})) << chat.output();  // the second turn continues the first
  ASSERT_TRUE(chat.command("/stats\n", {"4 messages", "engine: 2 requests finished"})) << chat.output();
  chat.type("/quit\n");
  EXPECT_EQ(chat.wait_exit(), 0) << chat.output();
}

TEST(ChatCli, ChatTemplateModelTokenizesItsSpecialTokens) {
  const std::string model = test::tiny_model_with_template("tiny-chatml.gguf", test::kChatmlJinja, true);
  {
    PtyProcess chat({kChat, "-m", model, "--temp", "0", "-n", "8"});
    ASSERT_TRUE(chat.expect("chat template chatml")) << chat.output();
    ASSERT_TRUE(chat.expect("\n> "));
    ASSERT_TRUE(chat.command("hello\n", {"tokens/s"})) << chat.output();
    chat.type("/quit\n");
    EXPECT_EQ(chat.wait_exit(), 0) << chat.output();
  }
  // The prompt is BOS, <|im_start|>, "user\nhello", <|im_end|>, "\n", <|im_start|>, "assistant\n",
  // each special one token and each text run tokenized on its own (as llama.cpp does).
  const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(model));
  const size_t expected = 4 + tok.encode("user\nhello", false).size() + tok.encode("\n", false).size() +
                          tok.encode("assistant\n", false).size();
  const RunResult r = run({kChat, "-m", model, "-p", "hello", "--temp", "0", "-n", "1"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("prompt " + std::to_string(expected) + " tokens]"), std::string::npos) << r.err;
}

TEST(ChatCli, UnknownTemplateIsRenderedWithANote) {
  const std::string model = test::tiny_model_with_template(
      "tiny-unknown.gguf", "{% for m in messages %}{{ m['content'] }}{% endfor %}", false);
  const RunResult r = run({kChat, "-m", model, "-p", "hello", "--temp", "0", "-n", "4"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(count_lines(r.err), 2) << "the note, then the reply's figures: " << r.err;
  EXPECT_NE(r.err.find("not a family pagoda-chat knows; replies stop only at end of text\n"), std::string::npos)
      << r.err;
  const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(model));
  const size_t expected = 1 + tok.encode("hello", false).size();  // BOS and the template's output
  EXPECT_NE(r.err.find("prompt " + std::to_string(expected) + " tokens]"), std::string::npos) << r.err;
}

TEST(ChatCli, ChatTemplateFileReplacesTheModels) {
  // a model whose own template only echoes the text, given ChatML from a file
  const std::string model = test::tiny_model_with_template(
      "tiny-echo-chatml-tokens.gguf", "{% for m in messages %}{{ m['content'] }}{% endfor %}", true);
  const std::string file = test::scratch_path("chatml.jinja");
  std::ofstream(file) << test::kChatmlJinja;
  const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(model));
  const size_t expected = 4 + tok.encode("user\nhello", false).size() + tok.encode("\n", false).size() +
                          tok.encode("assistant\n", false).size();
  const RunResult r = run({kChat, "-m", model, "--chat-template-file", file, "-p", "hello", "--temp", "0", "-n", "1"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("prompt " + std::to_string(expected) + " tokens]"), std::string::npos) << r.err;

  const RunResult missing =
      run({kChat, "-m", model, "--chat-template-file", test::scratch_path("no-such.jinja"), "-p", "x"});
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.err.find("--chat-template-file: cannot read"), std::string::npos) << missing.err;
}

// The prompt sizes in the figures after each reply ("..., 850.0 tokens/s, prompt 12 tokens]").
std::vector<int> prompt_sizes(const std::string& output) {
  std::vector<int> sizes;
  const std::string mark = "tokens/s, prompt ";
  for (size_t at = output.find(mark); at != std::string::npos; at = output.find(mark, at + 1)) {
    sizes.push_back(std::atoi(output.c_str() + at + mark.size()));
  }
  return sizes;
}

// -c 48 -n 16 leaves prompts 32 tokens; plain continuation keeps the conversation's last 32.
TEST(ChatCli, PlainContinuationKeepsTheTailOfALongConversation) {
  PtyProcess chat({kChat, "-m", test::tiny_gqa_model(), "-c", "48", "-n", "16", "--temp", "0"});
  ASSERT_TRUE(chat.expect("\n> ")) << chat.output();
  for (int turn = 0; turn < 4; ++turn) {
    chat.type("and then the little dog ran home\n");
    ASSERT_TRUE(chat.expect("tokens]\n> ")) << chat.output();
  }
  const std::vector<int> sizes = prompt_sizes(chat.output());
  ASSERT_EQ(sizes.size(), 4u) << chat.output();
  for (int size : sizes) EXPECT_LE(size, 32);
  EXPECT_EQ(sizes.back(), 32) << "the conversation outgrew the context and was cut to its tail";
  chat.type("/quit\n");
  EXPECT_EQ(chat.wait_exit(), 0);
}

// With a template whole exchanges go, oldest first; a message too long for the context alone is
// refused and the chat goes on.
TEST(ChatCli, ChatTemplateDropsTheOldestExchanges) {
  const std::string model = test::tiny_model_with_template("tiny-chatml-small.gguf", test::kChatmlJinja, true);
  PtyProcess chat({kChat, "-m", model, "-c", "64", "-n", "16", "--temp", "0"});
  ASSERT_TRUE(chat.expect("\n> ")) << chat.output();
  for (int turn = 0; turn < 4; ++turn) {
    chat.type("tell me more\n");
    ASSERT_TRUE(chat.expect("tokens]\n> ")) << chat.output();
  }
  for (int size : prompt_sizes(chat.output())) EXPECT_LE(size, 48);
  chat.type("/stats\n");
  std::string stats;
  ASSERT_TRUE(chat.expect("\n> ", &stats)) << chat.output();
  EXPECT_EQ(stats.find("8 messages"), std::string::npos) << "older exchanges were dropped: " << stats;

  std::string words;
  for (int i = 0; i < 60; ++i) words += "word ";
  chat.type(words + "\n");
  ASSERT_TRUE(chat.expect("does not fit the context of 64 tokens")) << chat.output();
  ASSERT_TRUE(chat.expect("\n> "));
  chat.type("/quit\n");
  EXPECT_EQ(chat.wait_exit(), 0);
}

// ---------------------------------------------------------------------------------------------
// Images

// The tiny LLaVA pair's language model with a ChatML template and ChatML's tokens.
const std::string& llava_chatml_model() {
  static const std::string model =
      test::model_with_template("llava-chatml.gguf", test::llava_files().model, test::kChatmlJinja, true);
  return model;
}

// A conversation as a pagoda-server client holds it: every turn sends all the messages so far,
// each message's images as image parts before its text; greedy replies.
class ServedChat {
 public:
  explicit ServedChat(const std::string& model) : engine_(config(model)) {}

  Completion say(const std::string& text, const std::vector<std::string>& images, int32_t max_tokens) {
    std::string markers;
    for (size_t i = 0; i < images.size(); ++i) markers += kMarker;
    messages_.push_back({"user", markers + text});
    images_.insert(images_.end(), images.begin(), images.end());
    const ChatPrompt prompt = engine_.render_chat(messages_, {});
    std::vector<int32_t> at;
    Request r;
    r.prompt_ids = engine_.tokenize(prompt, engine_.add_bos(), kMarker, at);
    EXPECT_EQ(at.size(), images_.size());
    for (size_t i = 0; i < images_.size(); ++i) r.images.push_back({images_[i], at.at(i)});
    r.max_new_tokens = max_tokens;
    r.sampling.temperature = 0.0f;
    r.stop_token_ids = engine_.chat_format().stop_token_ids;
    r.stop_strings = engine_.chat_format().stop_strings;
    const Completion c = engine_.submit(std::move(r)).get();
    messages_.push_back({"assistant", c.text});
    return c;
  }

 private:
  static constexpr const char* kMarker = "<__image_test__>";
  static EngineConfig config(const std::string& model) {
    EngineConfig c;
    c.model_path = model;
    c.mmproj_path = test::llava_files().mmproj;
    c.threads = 1;
    return c;
  }
  Engine engine_;
  std::vector<ChatMessage> messages_;
  std::vector<std::string> images_;  // every message's, in order
};

std::vector<std::string> with_images(std::vector<std::string> args) {
  args.insert(args.begin(), {kChat, "--mmproj", test::llava_files().mmproj, "--temp", "0"});
  return args;
}

TEST(ChatCli, ImageFlagPutsTheImageBeforeTheFirstMessagesTextInTheTemplate) {
  const std::string image = test::png_path("chat-a.png", 40, 30, 1);
  const Completion want = ServedChat(llava_chatml_model()).say("What is it?", {test::read_file(image)}, 8);
  ASSERT_NE(want.finish_reason, FinishReason::Error) << want.error;
  const RunResult r = run(with_images({"-m", llava_chatml_model(), "--image", image, "-p", "What is it?", "-n", "8"}));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, want.text + "\n");
  EXPECT_NE(r.err.find("prompt " + std::to_string(want.prompt_tokens) + " tokens]"), std::string::npos) << r.err;

  // The image's 16 rows are prompt tokens (the text around it, tokenized in two pieces, may take
  // a token more than whole).
  const RunResult text_only = run(with_images({"-m", llava_chatml_model(), "-p", "What is it?", "-n", "8"}));
  const std::vector<int> sizes = prompt_sizes(text_only.err);
  ASSERT_EQ(sizes.size(), 1u) << text_only.err;
  EXPECT_GE(want.prompt_tokens - sizes[0], 16);
  EXPECT_LE(want.prompt_tokens - sizes[0], 17);
}

// /image attaches to the next message, and later turns send that message's image again.
TEST(ChatCli, ImageCommandAttachesToTheNextMessageWhichKeepsItInLaterTurns) {
  const std::string a = test::png_path("chat-b.png", 40, 30, 2), b = test::png_path("chat-c.png", 30, 50, 3);
  ServedChat served(llava_chatml_model());
  const Completion first = served.say("What is it?", {test::read_file(a)}, 8);
  const Completion second = served.say("And this?", {test::read_file(b)}, 8);
  const Completion third = served.say("Compare them.", {}, 8);

  PtyProcess chat(with_images({"-m", llava_chatml_model(), "-n", "8"}));
  ASSERT_TRUE(chat.expect("\n> ")) << chat.output();
  ASSERT_TRUE(chat.command("/image " + a + "\n", {"attached to your next message"})) << chat.output();
  ASSERT_TRUE(chat.command("What is it?\n", {"tokens]"})) << chat.output();
  ASSERT_TRUE(chat.command("/image " + b + "\n", {"attached to your next message"})) << chat.output();
  ASSERT_TRUE(chat.command("And this?\n", {"tokens]"})) << chat.output();
  ASSERT_TRUE(chat.command("Compare them.\n", {"tokens]"})) << chat.output();
  EXPECT_EQ(prompt_sizes(chat.output()),
            (std::vector<int>{first.prompt_tokens, second.prompt_tokens, third.prompt_tokens}));
  ASSERT_TRUE(chat.command("/stats\n", {"6 messages, 2 images"})) << chat.output();

  ASSERT_TRUE(chat.command("/image /no/such.png\n", {"pagoda-chat: /no/such.png: cannot open"})) << chat.output();
  ASSERT_TRUE(chat.command("/image\n", {"/image needs a file"})) << chat.output();
  ASSERT_TRUE(chat.command("/usr/bin is a folder\n", {"tokens]"})) << "a message, not a command: " << chat.output();
  chat.type("/quit\n");
  EXPECT_EQ(chat.wait_exit(), 0) << chat.output();

  PtyProcess text_only({kChat, "-m", test::tiny_gqa_model(), "-n", "4"});
  ASSERT_TRUE(text_only.expect("\n> ")) << text_only.output();
  ASSERT_TRUE(text_only.command("/image " + a + "\n", {"takes no images: start pagoda-chat with --mmproj"}))
      << text_only.output();
  text_only.type("/quit\n");
  EXPECT_EQ(text_only.wait_exit(), 0);
}

// Plain continuation cuts a long conversation from the front: an image goes whole, and the
// prompts, counted with the images' rows, stay within -c 48 -n 16's 32 positions.
TEST(ChatCli, PlainContinuationCutsAnImageWholeFromTheTail) {
  const std::string image = test::png_path("chat-d.png", 40, 30, 4);
  PtyProcess chat(with_images({"-m", test::llava_files().model, "-c", "48", "-n", "16", "--image", image}));
  ASSERT_TRUE(chat.expect("[1 image attached to your first message]")) << chat.output();
  for (const char* line : {"hello", "and then the little dog ran home", "and then the little dog ran home",
                           "and then the little dog ran home"}) {
    chat.type(std::string(line) + "\n");
    ASSERT_TRUE(chat.expect("tokens]\n> ")) << chat.output();
  }
  const std::vector<int> sizes = prompt_sizes(chat.output());
  ASSERT_EQ(sizes.size(), 4u) << chat.output();
  EXPECT_GT(sizes[0], 16) << "the first prompt holds the image";
  for (int size : sizes) EXPECT_LE(size, 32);
  chat.type("/quit\n");
  EXPECT_EQ(chat.wait_exit(), 0);
}

// Each mistake gives one line on stderr naming it, nothing on stdout, and a failing status.
TEST(ChatCli, ErrorsAreOneLineAndAFailingStatus) {
  const std::string tiny = test::tiny_gqa_model();
  const test::VisionFiles& llava = test::llava_files();
  const std::string garbage = test::scratch_path("garbage.gguf");
  std::ofstream(garbage) << "not a model at all";
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"-m", "/no/such/model.gguf", "-p", "hi"}, "/no/such/model.gguf"},
      {{"-m", garbage, "-p", "hi"}, garbage},
      {{"-m", test::scratch_path(""), "-p", "hi"}, "directory"},
      {{"-m", tiny, "--bogus"}, "unknown argument '--bogus'"},
      {{"-m", tiny, "-p", "hi", "--temp", "warm"}, "--temp needs a number, got 'warm'"},
      {{"-m", tiny, "-p", "hi", "-n", "12x"}, "--n-predict needs a number"},
      {{"-m", tiny, "-p", "hi", "-n", "0"}, "-n must be at least 1"},
      {{"-m", tiny, "-p", "hi", "--temp", "-1"}, "temperature"},
      {{"-m", tiny, "-p", "hi", "--top-p", "0"}, "top_p"},
      {{"-m", tiny, "-p", "hi", "-c", "100000"}, "-c 100000 is more than the model's context (256 tokens)"},
      {{"-m", tiny, "-p", "hi", "-t", "-2"}, "threads"},
      {{"-m", tiny, "-p", ""}, "the prompt is empty"},
      {{"-m", tiny, "-p"}, "--prompt needs a value"},
      {{"-m", tiny}, "stdin is not a terminal and holds no prompt"},
      {{"-m", tiny, "-p", "hi", "--lora", "nameonly"}, "--lora needs NAME=PATH[:SCALE]"},
      {{"-m", tiny, "-p", "hi", "--lora", "a=" + garbage}, garbage},
      {{"-m", tiny, "-p", "hi", "--image", garbage}, "--image needs --mmproj F"},
      {{"-m", llava.model, "--mmproj", llava.mmproj, "-p", "hi", "--image", "/no/such.png"},
       "/no/such.png: cannot open"},
      {{"-m", llava.model, "--mmproj", llava.mmproj, "-p", "hi", "--image", garbage}, garbage + ": "},
      {{"-m", tiny, "--mmproj", llava.mmproj, "-p", "hi"}, "not this model's"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {kChat};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const RunResult r = run(args);
    const std::string what = testing::PrintToString(c.args);
    EXPECT_NE(r.status, 0) << what;
    EXPECT_NE(r.status, -1) << what << ": killed at the timeout";
    EXPECT_EQ(r.out, "") << what;
    EXPECT_EQ(count_lines(r.err), 1) << what << ": " << r.err;
    EXPECT_TRUE(r.err.starts_with("pagoda-chat: ")) << what << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << what << ": " << r.err;
  }
}

TEST(ChatCli, HelpDocumentsTheFlagsAndCommands) {
  const RunResult r = run({kChat, "--help"});
  EXPECT_EQ(r.status, 0);
  for (const char* s :
       {"--model", "--prompt",         "--n-predict",     "--ctx-size", "--temp",    "--top-k",     "--top-p",
        "--min-p", "--repeat-penalty", "--repeat-last-n", "--seed",     "--threads", "--tokenizer", "--mmproj",
        "--image", "/image",           "/reset",          "/stats",     "/help",     "/quit",       "Ctrl-C"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace pagoda
