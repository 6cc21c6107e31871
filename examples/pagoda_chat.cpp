// pagoda-chat: talk to a model in the terminal. Each reply streams token by token as the engine
// makes it; the conversation is kept (in the model's chat template when it is one we know, else
// as plain text the model continues) and submitted whole each turn, with the images attached to
// its messages.
//   pagoda-chat -m model.gguf                        interactive
//   pagoda-chat -m model.gguf -p "Once upon a time"  one-shot: print the completion and exit
//   echo "Once upon a time" | pagoda-chat -m model.gguf
//   pagoda-chat -m llava.gguf --mmproj mmproj.gguf --image cat.png -p "What is this?"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "examples/common/args.h"
#include "examples/common/cache_type_flag.h"
#include "examples/common/chat_template_flag.h"
#include "examples/common/lora_flag.h"
#include "examples/common/grammar_flags.h"
#include "examples/common/kv_tier_flags.h"
#include "examples/common/sampling_flags.h"
#include "examples/common/speculative_flags.h"
#include "examples/common/default_model.h"
#include "examples/common/image_files.h"
#include "pagoda/engine.h"
#include "protocol/image_parts.h"

namespace {

constexpr const char* kUsage = R"(usage: pagoda-chat [-m MODEL] [-p TEXT] [options]
Chat with a model in the terminal: type a line, and the reply streams as it is made. The whole
conversation is sent each turn (the oldest turns dropped when it outgrows the context), laid out
in the model's chat template when it is a known family (ChatML, Llama-2, Llama-3, Mistral,
Zephyr, Gemma, Phi-3, Vicuna), else as plain text that the model continues.
With -p, or with the prompt piped on stdin, it prints one completion and exits.

  -m, --model PATH        GGUF file, or llama2.c checkpoint (.bin). Without it: a random-weight
                          s15m model, written on first use to $XDG_CACHE_HOME/pagoda (or
                          ~/.cache/pagoda); its text means nothing
  --tokenizer PATH        llama2.c tokenizer.bin (default: tokenizer.bin beside the checkpoint)
  -p, --prompt TEXT       one-shot: print the completion of TEXT and exit
  -n, --n-predict N       tokens a reply may have, -1 = no limit (default 256); always capped to
                          the room left in the context
  -c, --ctx-size N        context tokens to use, at most the model's; 0 = the model's (default)
  --temp X                temperature, 0 = greedy (default 0.8)
  --top-k N               keep the N most likely tokens, 0 = off (default 40)
  --top-p X               keep the likeliest tokens up to probability X, 1 = off (default 0.95)
  --min-p X               drop tokens below X times the top probability, 0 = off (default 0.05)
  --repeat-penalty X      penalty on recently seen tokens, 1 = off (default 1.0)
  --repeat-last-n N       how many recent tokens the penalty looks at (default 64)
  --presence-penalty X    OpenAI's presence penalty over the reply's tokens, in [-2, 2] (default 0)
  --frequency-penalty X   OpenAI's frequency penalty, likewise (default 0)
  --logit-bias ID+X|ID-X  add X to token ID's logit (repeatable; -100 bans it)
  --min-tokens N          no end of reply before N tokens (default 0)
  --seed N                random seed, -1 = a random one (default -1)
  -t, --threads N         compute threads (default: all cores)
  --cache-type T          KV cache type: f32, f16 (default), bf16 or q8_0
  --no-mmap               read the model into memory instead of mapping it (llama.cpp's
                          flag): costs its size in RSS, and the file may then change freely
  --lora NAME=PATH[:SCALE]  reply with this LoRA adapter (llama.cpp's GGUF adapter format),
                          its alpha / rank times SCALE (default 1)
  --chat-template-file F  lay the conversation out with this Jinja chat template instead of
                          the model's own
  --mmproj F              the model's vision projector (llama.cpp's mmproj GGUF, LLaVA-style),
                          so that messages may hold images
  --image F               attach an image (PNG, JPEG or WebP) to the first message (repeatable);
                          needs --mmproj. In the chat, /image F attaches one to the next message
  -h, --help              this text
)";

constexpr const char* kCommands = R"(  /image F attach the image file F to your next message (with --mmproj; repeatable)
  /reset   forget the conversation (and the images attached to your next message)
  /stats   the engine's figures and the last reply's
  /help    this list
  /quit    leave (so do Ctrl-D and Ctrl-C at the prompt)
  Ctrl-C while a reply streams stops that reply, not the program.
)";

constexpr const char* kNotes = R"(
A reply ends at EOS, at the end of the template's turn or, in plain continuation, at BOS (the
model starting a new document). After each reply stderr shows its tokens, time to first token,
tokens/s and prompt tokens (an image's are among them). Images stay with their message: each turn
sends them again, placed by the chat template before the message's text, until the message is
dropped to fit the context. In one-shot mode Ctrl-C stops the reply and the program exits with
status 130.
)";

constexpr int32_t kTokensPerPage = 16;

// Set by the SIGINT handler, which does nothing else; the main thread polls it while it waits
// for input or for a reply, so it does not matter which thread the signal lands on.
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler needs a lock-free flag");

extern "C" void on_sigint(int) { g_interrupted.store(true); }

void install_sigint_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // writes to the terminal resume; the waits poll the flag themselves
  sigaction(SIGINT, &sa, nullptr);
}

struct Options {
  std::optional<std::string> model;
  std::string tokenizer;
  std::optional<std::string> prompt;
  int32_t n_predict = 256;
  int32_t ctx_size = 0;  // 0: the model's
  int threads = 0;
  bool use_mmap = true;
  pagoda::KvCacheType kv_type = pagoda::KvCacheType::F16;
  pagoda::SpeculativeParams speculative;
  std::string draft_model;  // --model-draft; "" = none
  pagoda::cli::KvTierFlags kv_tiers;
  pagoda::SamplingParams sampling;
  std::optional<pagoda::cli::LoraFlag> lora;
  std::string chat_template;        // "" = the model's
  pagoda::Request constraint;       // its grammar or json_schema, for every reply
  std::string mmproj;               // "" = none: text only
  std::vector<std::string> images;  // --image: attached to the first message
};

// llama.cpp's flags and defaults.
Options parse_options(const pagoda::cli::Args& args) {
  Options o;
  o.model = args.get("--model");
  o.tokenizer = args.get("--tokenizer", "");
  o.prompt = args.get("--prompt");
  o.n_predict = args.number<int32_t>("--n-predict", 256);
  if (o.n_predict == -1) o.n_predict = INT32_MAX;
  if (o.n_predict < 1) throw pagoda::Error("-n must be at least 1, or -1 for no limit");
  o.ctx_size = args.number<int32_t>("--ctx-size", 0);
  if (o.ctx_size < 0) throw pagoda::Error("-c must be 0 (the model's context) or a token count");
  o.threads = args.number("--threads", 0);
  o.kv_type = pagoda::cli::cache_type_flag(args);
  o.speculative = pagoda::cli::speculative_from_flags(args);
  o.draft_model = pagoda::cli::draft_model_from_flags(args);
  o.kv_tiers = pagoda::cli::kv_tier_flags(args);
  o.use_mmap = !args.has("--no-mmap");
  o.chat_template = pagoda::cli::chat_template_flag(args);
  pagoda::cli::constraint_from_flags(args, o.constraint);
  o.mmproj = args.get("--mmproj", "");
  o.images = args.all("--image");
  if (!o.images.empty() && o.mmproj.empty()) throw pagoda::Error("--image needs --mmproj F (the vision projector)");
  if (const auto loras = args.all("--lora"); loras.size() > 1) {
    throw pagoda::Error("give --lora once: a chat runs on one adapter");
  } else if (loras.size() == 1) {
    o.lora = pagoda::cli::parse_lora(loras.front());
  }
  pagoda::SamplingParams& s = o.sampling;
  s = pagoda::cli::sampling_from_flags(args, {.temperature = 0.8f,
                                              .top_k = 40,
                                              .top_p = 0.95f,
                                              .min_p = 0.05f,
                                              .repetition_penalty = 1.0f,
                                              .repetition_window = 64});
  const int64_t seed = args.number<int64_t>("--seed", -1);
  if (seed < -1) throw pagoda::Error("--seed must be -1 (random) or >= 0");
  s.seed = seed == -1 ? std::random_device{}() : uint64_t(seed);
  s.validate();
  return o;
}

// The whole of a piped stdin, without the trailing newline `echo` adds.
std::string read_stdin() {
  std::string text(std::istreambuf_iterator<char>(std::cin), {});
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

std::string model_path(const Options& o) {
  if (o.model) return *o.model;
  const pagoda::cli::DefaultModel m = pagoda::cli::ensure_default_model();
  if (m.written) std::fprintf(stderr, "pagoda-chat: wrote the default model to %s\n", m.path.c_str());
  std::fprintf(stderr,
               "pagoda-chat: no -m given, so this is %s: random weights in the shape of llama2.c's 15M-parameter "
               "stories15M. Its text means nothing; for real text pass a Llama GGUF: pagoda-chat -m model.gguf\n",
               m.path.c_str());
  return m.path;
}

// -c sizes the KV cache to hold that context; otherwise the engine's default budget is used.
pagoda::EngineConfig engine_config(const Options& o, const std::string& model) {
  pagoda::EngineConfig c{
      .model_path = model, .tokenizer_path = o.tokenizer, .threads = o.threads, .kv_cache_type = o.kv_type};
  c.tokens_per_page = kTokensPerPage;
  c.use_mmap = o.use_mmap;
  c.chat_template = o.chat_template;
  c.mmproj_path = o.mmproj;
  c.speculative = o.speculative;
  c.draft_model_path = o.draft_model;
  o.kv_tiers.apply(c);
  if (o.ctx_size > 0) {
    const int32_t pages = (o.ctx_size + kTokensPerPage - 1) / kTokensPerPage;
    c.kv_pages = pages + pages / 50 + 2;  // and the 1% the engine keeps free at admission
  }
  return c;
}

// The context a conversation may fill: -c, else the model's, and never more than the KV cache
// holds for one prompt (the engine admits a prompt only while 1% of the pages stay free).
int32_t context_size(const pagoda::Engine& engine, const Options& o) {
  const int32_t model_ctx = engine.context_length();
  if (o.ctx_size > model_ctx) {
    throw pagoda::Error("-c " + std::to_string(o.ctx_size) + " is more than the model's context (" +
                        std::to_string(model_ctx) + " tokens)");
  }
  const int64_t pages = engine.metrics().kv_pages_total;
  const int64_t cache_tokens = (pages - std::max<int64_t>(1, pages / 100)) * kTokensPerPage;
  const int32_t n_ctx = int32_t(std::min<int64_t>(o.ctx_size > 0 ? o.ctx_size : model_ctx, cache_tokens));
  if (n_ctx < 2) throw pagoda::Error("the context must hold at least 2 tokens (a prompt and a reply)");
  return n_ctx;
}

void print(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// Submits `r`, prints its text as it streams, and cancels it on Ctrl-C. Returns the completion.
pagoda::Completion stream_reply(pagoda::Engine& engine, pagoda::Request r) {
  r.stream = true;
  pagoda::RequestHandle handle = engine.submit(std::move(r));
  // Waits for tokens a little at a time, so a Ctrl-C is seen within 50 ms.
  while (!handle.stream_ended()) {
    if (auto event = handle.next_token(std::chrono::milliseconds(50))) print(event->text);
    if (g_interrupted.load()) handle.cancel();
  }
  g_interrupted.store(false);  // that Ctrl-C was for this reply
  return handle.get();
}

// "1 image", "2 images".
std::string plural(size_t n, const std::string& thing) { return std::to_string(n) + " " + thing + (n == 1 ? "" : "s"); }

std::string describe(const pagoda::Completion& c) {
  char text[200];
  const double rate = c.time_per_output_token_s > 0 ? 1.0 / c.time_per_output_token_s : 0.0;
  std::snprintf(text, sizeof text, "%zu tokens, time to first token %.1f ms, %.1f tokens/s, prompt %d tokens",
                c.token_ids.size(), c.time_to_first_token_s * 1e3, rate, c.prompt_tokens);
  return text;
}

// An image attached to a message: its file's bytes, and the prompt positions it takes.
struct Image {
  std::string data;
  int32_t length = 0;
};

// A message of the conversation and the images attached to it, which its content places before
// its text. Shared, so that the history is copied (to drop old turns) without copying images.
struct Message {
  pagoda::ChatMessage message;
  std::vector<std::shared_ptr<const Image>> images;
};

// A conversation laid out for the engine: its ids, and its images at their positions in them.
struct Prompt {
  std::vector<int32_t> ids;
  std::vector<std::shared_ptr<const Image>> images;
  std::vector<int32_t> at;  // each image's place: before the token at this index of ids

  // The positions the prompt takes: its tokens and its images' rows.
  size_t length() const {
    size_t n = ids.size();
    for (const auto& image : images) n += size_t(image->length);
    return n;
  }
};

class Chat {
 public:
  Chat(pagoda::Engine& engine, const Options& o, int32_t n_ctx, const std::string& model)
      : engine_(engine),
        sampling_(o.sampling),
        n_predict_(o.n_predict),
        n_ctx_(n_ctx),
        format_(engine.chat_format()),
        templated_(format_.family != "plain"),
        bos_id_(engine.tokenize("", true).front()),
        adapter_(o.lora ? o.lora->name : std::string()),
        grammar_(o.constraint.grammar),
        json_schema_(o.constraint.json_schema),
        marker_(pagoda::chat::ChatImages::random_image_marker()) {
    if (engine.takes_images()) sizer_.emplace(o.mmproj, model, o.tokenizer);
  }

  std::string mode() const { return templated_ ? "chat template " + format_.family : "plain continuation"; }

  // Reads the image file at `path` and attaches it to the next message. pagoda::Error naming the
  // file when it cannot be read or is not an image the projector reads, or when the model takes
  // no images.
  void attach(const std::string& path) {
    if (!sizer_) throw pagoda::Error("the model takes no images: start pagoda-chat with --mmproj F (its projector)");
    std::string data = pagoda::cli::read_image_file(path);
    const int32_t length = sizer_->positions(data, path);
    pending_.push_back(std::make_shared<const Image>(Image{std::move(data), length}));
  }
  size_t attached() const { return pending_.size(); }

  // One exchange: the user's text (and the images attached to it) in, the reply streamed to
  // stdout and its figures to stderr. Nullopt when the message cannot be answered (too long for
  // the context, or an engine error); its images then stay attached to the next message.
  std::optional<pagoda::Completion> turn(const std::string& text) {
    history_.push_back({{"user", text}, std::exchange(pending_, {})});
    try {
      const std::optional<Prompt> prompt = fitted_prompt();
      if (!prompt) return take_back("that message does not fit the context of " + std::to_string(n_ctx_) + " tokens");
      const pagoda::Completion c = stream_reply(engine_, request(*prompt));
      print("\n");
      if (c.finish_reason == pagoda::FinishReason::Error) return take_back(c.error);
      history_.push_back({{"assistant", c.text}, {}});
      const bool stopped = c.finish_reason == pagoda::FinishReason::Cancelled;
      std::fprintf(stderr, "[%s%s]\n", stopped ? "stopped: " : "", describe(c).c_str());
      last_ = c;
      return c;
    } catch (const pagoda::Error& e) {  // refused at submit: the conversation goes on without it
      return take_back(e.what());
    }
  }

  // Forgets the conversation and the images waiting for the next message.
  void reset() {
    history_.clear();
    pending_.clear();
  }

  void print_stats() const {
    if (last_)
      std::printf("last reply: %s, ended by %s\n", describe(*last_).c_str(), finish_reason_name(last_->finish_reason));
    // In plain continuation the conversation may outgrow the context; each prompt is its tail.
    const Prompt prompt = history_.empty() ? Prompt{} : prompt_of(history_);
    const std::string images = prompt.images.empty() ? "" : plural(prompt.images.size(), "image") + ", ";
    std::printf("conversation: %zu messages, %s%zu tokens, context %d tokens, %s\n", history_.size(), images.c_str(),
                prompt.length(), n_ctx_, mode().c_str());
    const pagoda::EngineMetrics m = engine_.metrics();
    std::printf(
        "engine: %lld requests finished, %lld tokens generated at %.1f tokens/s, KV pages %lld of %lld in use, "
        "%lld preemptions\n",
        (long long)m.finished, (long long)m.generated_tokens, m.tokens_per_second, (long long)m.kv_pages_used,
        (long long)m.kv_pages_total, (long long)m.preempted);
  }

 private:
  // The newest message taken back after it could not be answered: says why, and keeps its images
  // for the next message.
  std::nullopt_t take_back(const std::string& why) {
    pending_ = std::move(history_.back().images);
    history_.pop_back();
    const std::string kept = pending_.empty() ? "" : " (its images stay attached to your next message)";
    std::fprintf(stderr, "pagoda-chat: %s%s\n", why.c_str(), kept.c_str());
    return std::nullopt;
  }

  // The messages laid out by the chat template, each one's images as markers before its text, and
  // tokenized: the template's control tokens become themselves, so its "<|im_start|>" is one
  // token, while the same text typed by the user stays text. The markers become the images'
  // places, as pagoda-server places a chat's image parts; the marker is drawn at random, so no
  // typed text can stand for an image.
  Prompt prompt_of(const std::vector<Message>& history) const {
    std::vector<pagoda::ChatMessage> messages;
    Prompt p;
    for (const Message& m : history) {
      messages.push_back(m.message);
      std::string markers;
      for (const auto& image : m.images) {
        markers += marker_;
        p.images.push_back(image);
      }
      messages.back().content.insert(0, markers);
    }
    const pagoda::ChatPrompt text = engine_.render_chat(messages, pagoda::ChatTemplateOptions{});
    p.ids = engine_.tokenize(text, engine_.add_bos(), p.images.empty() ? "" : marker_, p.at);
    if (p.at.size() != p.images.size()) {
      throw pagoda::Error("the chat template placed " + std::to_string(p.at.size()) + " of the " +
                          std::to_string(p.images.size()) + " images in the prompt");
    }
    return p;
  }

  // The conversation as a prompt that leaves room for a reply: the oldest messages go first
  // (whole exchanges with a template, which wants user and assistant turns alternating). In
  // plain continuation a message is kept while part of it still fits, and the prompt is cut
  // from the front to the tokens the model continues from. Nullopt when, with a template, the
  // newest message alone is too long.
  std::optional<Prompt> fitted_prompt() {
    const size_t budget = size_t(n_ctx_ - std::min(n_predict_, n_ctx_ / 2));
    const size_t drop = templated_ ? 2 : 1;
    Prompt prompt = prompt_of(history_);
    while (prompt.length() > budget && history_.size() > drop) {
      const std::vector<Message> shorter(history_.begin() + ptrdiff_t(drop), history_.end());
      Prompt shorter_prompt = prompt_of(shorter);
      if (!templated_ && shorter_prompt.length() < budget) break;
      history_ = shorter;
      prompt = std::move(shorter_prompt);
    }
    if (prompt.length() <= budget) return prompt;
    if (templated_) return std::nullopt;
    return tail(std::move(prompt), budget);
  }

  // Plain continuation: `prompt` cut from the front, after BOS, to its last `budget` positions.
  // An image before the cut goes whole (part of one means nothing); nullopt when the images
  // after every cut are still too long.
  std::optional<Prompt> tail(Prompt prompt, size_t budget) const {
    const size_t front = engine_.add_bos() ? 1 : 0;  // BOS stays first
    auto kept = [&](size_t cut) {
      size_t n = front + prompt.ids.size() - cut;
      for (size_t i = 0; i < prompt.images.size(); ++i) {
        if (size_t(prompt.at[i]) >= cut) n += size_t(prompt.images[i]->length);
      }
      return n;
    };
    size_t cut = front;
    for (; kept(cut) > budget; ++cut) {
      if (cut == prompt.ids.size()) return std::nullopt;
    }
    Prompt out;
    out.ids.assign(prompt.ids.begin(), prompt.ids.begin() + ptrdiff_t(front));
    out.ids.insert(out.ids.end(), prompt.ids.begin() + ptrdiff_t(cut), prompt.ids.end());
    for (size_t i = 0; i < prompt.images.size(); ++i) {
      if (size_t(prompt.at[i]) < cut) continue;
      out.images.push_back(prompt.images[i]);
      out.at.push_back(prompt.at[i] - int32_t(cut - front));
    }
    return out;
  }

  pagoda::Request request(const Prompt& prompt) {
    pagoda::Request r;
    r.max_new_tokens = std::min(n_predict_, n_ctx_ - int32_t(prompt.length()));
    r.prompt_ids = prompt.ids;
    for (size_t i = 0; i < prompt.images.size(); ++i) r.images.push_back({prompt.images[i]->data, prompt.at[i]});
    r.sampling = sampling_;
    r.sampling.seed += turns_++;  // a fixed --seed makes the session repeatable, not each reply alike
    r.adapter = adapter_;
    r.grammar = grammar_;
    r.json_schema = json_schema_;
    if (templated_) {
      r.stop_token_ids = format_.stop_token_ids;
      r.stop_strings = format_.stop_strings;
    } else {
      r.stop_token_ids = {bos_id_};
    }
    return r;
  }

  pagoda::Engine& engine_;
  pagoda::SamplingParams sampling_;
  int32_t n_predict_;
  int32_t n_ctx_;
  pagoda::ChatFormat format_;
  bool templated_;
  int32_t bos_id_;
  std::string adapter_;                           // the --lora adapter replies use; empty = the base model
  std::string grammar_;                           // --grammar / --grammar-file: every reply is a sentence of it
  std::string json_schema_;                       // --json-schema / --json-schema-file: every reply validates
  std::string marker_;                            // what stands for an image in the rendered conversation
  std::optional<pagoda::cli::ImageSizer> sizer_;  // with --mmproj
  std::vector<Message> history_;
  std::vector<std::shared_ptr<const Image>> pending_;  // attached to the next message
  uint64_t turns_ = 0;
  std::optional<pagoda::Completion> last_;
};

// The template lays the prompt out, but turns end where its family says: a template of no
// family pagoda knows has no end-of-turn to stop at but EOS, which is worth a note.
void note_unknown_template(const pagoda::Engine& engine) {
  if (engine.chat_template() && engine.chat_format().family == "plain") {
    std::fprintf(
        stderr, "pagoda-chat: the chat template is not a family pagoda-chat knows; replies stop only at end of text\n");
  }
}

// Lines from the terminal. Waits in short polls so that Ctrl-C is noticed within a tenth of a
// second whichever thread the signal lands on.
class LineReader {
 public:
  // The next line without its newline; nullopt at end of input or on Ctrl-C.
  std::optional<std::string> read_line() {
    for (;;) {
      if (const size_t nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      if (eof_) return buffer_.empty() ? std::nullopt : std::optional(std::exchange(buffer_, {}));
      if (g_interrupted.load()) return std::nullopt;
      fill();
    }
  }

 private:
  void fill() {
    pollfd p{STDIN_FILENO, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) return;  // a timeout, or a signal: look at the flag again
    char chunk[4096];
    const ssize_t n = read(STDIN_FILENO, chunk, sizeof chunk);
    if (n > 0) {
      buffer_.append(chunk, size_t(n));
    } else if (n == 0 || errno != EINTR) {
      eof_ = true;
    }
  }

  std::string buffer_;
  bool eof_ = false;
};

struct Command {
  std::string name;      // "/reset"
  std::string argument;  // /image's file
};

// A line that is a slash and lowercase letters ("/reset", "/bogus"), or /image and its argument.
// Other lines that start with a slash ("/usr/bin is where...") are messages.
std::optional<Command> command_of(const std::string& line) {
  const size_t space = line.find(' ');
  const std::string name = line.substr(0, space);
  if (name.size() < 2 || name[0] != '/' ||
      !std::all_of(name.begin() + 1, name.end(), [](char c) { return c >= 'a' && c <= 'z'; })) {
    return std::nullopt;
  }
  if (space == std::string::npos) return Command{name, ""};
  if (name != "/image") return std::nullopt;
  const size_t from = line.find_first_not_of(' ', space);
  return Command{name, from == std::string::npos ? "" : line.substr(from)};
}

// Attaches /image's file, or says why it cannot; the chat goes on either way.
void attach(Chat& chat, const std::string& path) {
  if (path.empty()) {
    std::fprintf(stderr, "pagoda-chat: /image needs a file: /image PATH\n");
    return;
  }
  try {
    chat.attach(path);
    std::fprintf(stderr, "[%s attached to your next message]\n", path.c_str());
  } catch (const pagoda::Error& e) {
    std::fprintf(stderr, "pagoda-chat: %s\n", e.what());
  }
}

// Runs a /command; false for /quit.
bool run_command(Chat& chat, const Command& command) {
  if (command.name == "/quit") return false;
  if (command.name == "/image") {
    attach(chat, command.argument);
  } else if (command.name == "/reset") {
    chat.reset();
    std::fprintf(stderr, "[conversation forgotten]\n");
  } else if (command.name == "/stats") {
    chat.print_stats();
  } else if (command.name == "/help") {
    std::fputs(kCommands, stdout);
  } else {
    std::fprintf(stderr, "pagoda-chat: unknown command %s (/help lists them)\n", command.name.c_str());
  }
  return true;
}

int interactive(Chat& chat, const std::string& model) {
  std::fprintf(stderr, "pagoda-chat: %s, %s\n", model.c_str(), chat.mode().c_str());
  std::fprintf(stderr,
               "Type a line and press Enter; /help lists the commands. Ctrl-C stops a reply; "
               "Ctrl-D or Ctrl-C at the prompt quits.\n");
  if (chat.attached() > 0)
    std::fprintf(stderr, "[%s attached to your first message]\n", plural(chat.attached(), "image").c_str());
  LineReader in;
  for (;;) {
    print("> ");
    const std::optional<std::string> line = in.read_line();
    if (!line) {
      print("\n");
      return 0;
    }
    const std::string word = line->substr(0, line->find_last_not_of(" \t\r") + 1);  // "/quit " too
    if (const std::optional<Command> command = command_of(word)) {
      if (!run_command(chat, *command)) return 0;
    } else if (!word.empty()) {
      chat.turn(*line);
    }
  }
}

int one_shot(Chat& chat, const std::string& prompt) {
  const std::optional<pagoda::Completion> c = chat.turn(prompt);
  if (!c) return 1;
  return c->finish_reason == pagoda::FinishReason::Cancelled ? 130 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::array kOwnFlags{"--model",  "--tokenizer", "--prompt",     "--n-predict",          "--ctx-size",
                               "--seed",   "--threads",   "--cache-type", "--chat-template-file", "--lora",
                               "--mmproj", "--image"};
    const pagoda::cli::Args args(
        argc, argv,
        pagoda::cli::flag_set({kOwnFlags, pagoda::cli::kSamplingFlags, pagoda::cli::kSpeculativeFlags,
                               pagoda::cli::kGrammarFlags, pagoda::cli::kKvTierFlags}),
        {"--help", "--no-mmap", "--spec-ngram"}, {{"-p", "--prompt"}, {"-n", "--n-predict"}});
    if (args.has("--help")) {
      std::cout << kUsage << pagoda::cli::kSpeculativeUsage << pagoda::cli::kGrammarUsage << pagoda::cli::kKvTierUsage
                << "\nIn the chat:\n"
                << kCommands << kNotes;
      return 0;
    }
    const Options opt = parse_options(args);
    std::optional<std::string> prompt = opt.prompt;
    if (!prompt && !isatty(STDIN_FILENO)) {
      prompt = read_stdin();
      if (prompt->empty()) throw pagoda::Error("stdin is not a terminal and holds no prompt (or give -p TEXT)");
    }
    if (prompt && prompt->empty()) throw pagoda::Error("the prompt is empty");

    const std::string model = model_path(opt);
    pagoda::Engine engine(engine_config(opt, model));
    if (opt.lora) engine.load_adapter(opt.lora->name, opt.lora->path, opt.lora->scale);
    note_unknown_template(engine);
    Chat chat(engine, opt, context_size(engine, opt), model);
    for (const std::string& image : opt.images) chat.attach(image);
    install_sigint_handler();
    return prompt ? one_shot(chat, *prompt) : interactive(chat, model);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pagoda-chat: %s\n", e.what());
    return 1;
  }
}
