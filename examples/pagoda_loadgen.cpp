// pagoda-loadgen: drives the engine with a synthetic serving workload and reports throughput,
// latency percentiles, KV cache use and preemptions; `--mode static` runs the same workload
// through static max-padded batching on the same kernels, `--mode both` runs both and compares.
// `--shared-prefix N` starts every prompt with the same N tokens (a system prompt), `--turns K`
// makes each request a conversation, and `--prefix-cache both` runs the engine with and
// without prefix caching on the same workload. `--agent C:T:L` is an agent loop's workload,
// conversations that take turns resending their growing contexts, and `--kv-disk-compare`
// runs it without and with the prefix cache's disk tier. `--mmproj F --image FILE` attaches an
// image to every request (a vision model's image+text chats).
//   pagoda-loadgen --preset s15m --requests 256 --concurrency 64 --prompt-len 16:128 --output-len 16:256
//   pagoda-loadgen -m model.gguf --rate 8 --mode both --json out.json
//   pagoda-loadgen --preset s15m -c 32 --shared-prefix 1024 --prompt-len 32:96 --output-len 64 --prefix-cache both
//   pagoda-loadgen -m model.gguf --agent 32:8:8192 -c 4 --output-len 64 --kv-disk-compare --kv-disk-size 16G
//   pagoda-loadgen -m llava.gguf --mmproj mmproj.gguf --image a.jpg --image b.png -n 8 -c 8 --prompt-len 32

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "engine/model/model.h"
#include "testing/synth.h"
#include "examples/common/args.h"
#include "examples/common/byte_size.h"
#include "examples/common/cache_type_flag.h"
#include "examples/common/image_files.h"
#include "examples/common/load_report.h"
#include "examples/common/resource_usage.h"
#include "examples/common/static_batcher.h"
#include "examples/loadgen/disk_tier_dir.h"
#include "examples/loadgen/driver.h"
#include "examples/loadgen/http_client.h"
#include "examples/loadgen/workload.h"
#include "pagoda/engine.h"

namespace {

using namespace pagoda;
using namespace pagoda::loadgen;
namespace fs = std::filesystem;

constexpr const char* kUsage = R"(usage: pagoda-loadgen (-m MODEL | --preset s15m|s110m) [options]
N client threads send requests with Poisson arrivals; each client has at most one request in
flight, so --concurrency caps the requests in flight. Prompts are random token ids (BOS
first); outputs ignore EOS and have exactly the drawn length. Latencies are measured from the
moment a client sends a request.
  -m, --model PATH        GGUF file or llama2.c checkpoint
  --preset NAME           s15m or s110m: a random-weight model, written once to --model-dir
  --model-dir DIR         where presets are kept (default: models/ in the build directory)
  --mode M                continuous (the engine, default), static (max-padded static
                          batches of --concurrency requests on the same kernels), or both
  -n, --requests N        requests in all (default 256)
  -c, --concurrency C     client threads = requests in flight at most (default 16)
  --rate R                arrivals per second, or inf: all at once (default inf)
  --prompt-len A:B        prompt tokens, uniform in [A, B] (default 16:128)
  --output-len A:B        generated tokens, uniform in [A, B] (default 16:256)
  --shared-prefix N       every prompt starts with the same N random tokens after BOS, a
                          system prompt (default 0); the engine is warmed first with one
                          untimed request of the prefix alone, as a server's would be
  --turns K               each request is a conversation of K turns, sent one after another
                          by its client: turn k's prompt is turn k-1's prompt + its reply + a
                          new user message of --prompt-len tokens (default 1; the engine only)
  --agent C:T:L           an agent loop: C conversations of T turns whose contexts grow to
                          about L tokens by the last turn. Each turn resends the whole
                          conversation (prompts and replies) with a new message of random
                          user/tool tokens, all of one length; every conversation starts at
                          once and each turn queues behind all the others' (at most
                          --concurrency in flight), so that together their contexts can
                          exceed the KV pool. Replies have --output-len tokens (one length,
                          default 64). In place of --requests, --turns, --prompt-len, --rate
  --prefix-cache M        the engine's automatic prefix caching: on (default), off, or both
                          (the same workload each way, one after the other)
  --seed N                workload and sampling seed (default 1)
  --temp X                sampling temperature, 0 = greedy (default 0)
  -t, --threads N         compute threads (default: all cores)
  --cache-type T          KV cache type: f32, f16 (default), bf16 or q8_0; both modes use it
  --kv-pages N            KV cache pages of 16 tokens, the RAM pool (default: enough for C of
                          the longest requests, so that nothing is preempted); both modes use it
  --kv-disk DIR           the engine's prefix cache gets a disk tier in DIR (kept afterwards)
  --kv-disk-size BYTES    the disk tier's size: bytes, or with K, M, G or T (powers of 1024;
                          default: the engine's, 8G)
  --kv-disk-compare       the same workload without, then with the disk tier, which starts
                          empty: in --kv-disk DIR, else in a fresh directory in $TMPDIR (or
                          /tmp) removed afterwards
  --max-running N         engine: sequences admitted at once (default 256)
  --token-budget N        engine: tokens in one step (default 512)
  --prefill-chunk N       engine: prompt tokens of one sequence in one step (default 256)
  --url URL               also run the workload against a running pagoda-server at URL
                          (http://HOST:PORT; streamed /v1/completions) after the in-process
                          run, for one comparison; --mode http runs only that
  --disconnect F          over HTTP, this fraction of the streams is dropped (the connection
                          closed) after half its tokens, to exercise cancellation (default 0)
  --mmproj F              the model's vision projector (llama.cpp's mmproj GGUF), for --image
  --image FILE            an image (PNG, JPEG or WebP) for the requests (repeatable): request i
                          carries image i mod their count, after BOS and the shared prefix, in
                          every turn; its rows are prompt tokens (in the figures, the context
                          check and the default --kv-pages). Latencies count its decoding and
                          resizing, which submit does on the client's thread. The engine keeps
                          recent images' encoder rows, so an image sent again is not encoded
                          again: give as many files as requests to encode every one. Needs
                          --mmproj and the in-process engine (--mode continuous, no --url)
  --json FILE             also write the figures as JSON
)";

constexpr int32_t kTokensPerPage = 16;

struct Options {
  std::string model, preset, model_dir, mode = "continuous", json, prefix_cache = "on", url, mmproj;
  std::vector<std::string> image_paths;  // --image
  std::vector<std::string> images;       // their bytes, read once the model is known
  double disconnect = 0.0;
  WorkloadSpec work;
  std::optional<AgentShape> agent;
  std::string kv_disk;  // --kv-disk: empty, a fresh directory when there is a disk tier
  uint64_t kv_disk_bytes = EngineConfig{}.kv_disk_bytes;
  bool kv_disk_compare = false;
  int32_t concurrency = 16;
  float temperature = 0.0f;
  int32_t threads = 0, kv_pages = 0, max_running = 256, token_budget = 512, prefill_chunk = 256;
  KvCacheType kv_type = KvCacheType::F16;
};

Range parse_range(const std::string& flag, const std::string& text) {
  const size_t colon = text.find(':');
  const std::string lo = text.substr(0, colon);
  const std::string hi = colon == std::string::npos ? lo : text.substr(colon + 1);
  const Range r{cli::Args::parse<int32_t>(flag, lo), cli::Args::parse<int32_t>(flag, hi)};
  if (r.lo < 1 || r.hi < r.lo) throw Error(flag + " needs A:B with 1 <= A <= B, got '" + text + "'");
  return r;
}

double parse_rate(const std::string& text) {
  if (text == "inf") return std::numeric_limits<double>::infinity();
  const double rate = cli::Args::parse<double>("--rate", text);
  if (!(rate > 0.0) || !std::isfinite(rate)) throw Error("--rate needs a positive number or inf, got '" + text + "'");
  return rate;
}

void require_positive(const std::string& flag, int64_t value) {
  if (value < 1) throw Error(flag + " must be at least 1, got " + std::to_string(value));
}

AgentShape parse_agent_shape(const std::string& text) {
  const size_t first = text.find(':'), second = text.find(':', first + 1);
  if (second == std::string::npos) throw Error("--agent needs C:T:L (conversations:turns:context), got '" + text + "'");
  const AgentShape shape{cli::Args::parse<int64_t>("--agent", text.substr(0, first)),
                         cli::Args::parse<int32_t>("--agent", text.substr(first + 1, second - first - 1)),
                         cli::Args::parse<int32_t>("--agent", text.substr(second + 1))};
  if (shape.conversations < 1 || shape.turns < 1 || shape.context < 1)
    throw Error("--agent needs C:T:L of positive numbers, got '" + text + "'");
  return shape;
}

void reject_flags_agent_sets(const cli::Args& args) {
  for (const char* flag : {"--requests", "--turns", "--prompt-len", "--rate"}) {
    if (args.has(flag)) throw Error(std::string("--agent sets what ") + flag + " would; give one of them");
  }
}

// An agent's replies: one length, 64 unless --output-len says.
int32_t agent_output_len(const cli::Args& args, const Range& given) {
  if (!args.has("--output-len")) return 64;
  if (given.lo != given.hi) throw Error("--agent needs one --output-len, not a range");
  return given.lo;
}

int32_t pages_for(int32_t positions) { return (positions + kTokensPerPage - 1) / kTokensPerPage; }

void parse_disk_tier(const cli::Args& args, Options& o) {
  o.kv_disk = args.get("--kv-disk", "");
  o.kv_disk_compare = args.has("--kv-disk-compare");
  const bool disk_tier = args.has("--kv-disk") || o.kv_disk_compare;
  if (auto size = args.get("--kv-disk-size")) {
    if (!disk_tier) throw Error("--kv-disk-size needs --kv-disk or --kv-disk-compare");
    o.kv_disk_bytes = cli::parse_byte_size("--kv-disk-size", *size);
    if (o.kv_disk_bytes == 0) throw Error("--kv-disk-size must be more than 0 bytes");
  }
  if (args.has("--kv-disk") && o.kv_disk.empty()) throw Error("--kv-disk needs a directory");
  if (!disk_tier) return;
  if (o.prefix_cache != "on") throw Error("the disk tier is the prefix cache's: it needs --prefix-cache on");
  if (o.mode != "continuous") throw Error("the disk tier is the in-process engine's: it needs --mode continuous");
  if (o.kv_disk_compare && !o.url.empty()) throw Error("--kv-disk-compare compares in-process runs only: drop --url");
  // Checked before the run without the disk tier, which can take hours.
  if (o.kv_disk_compare && fs::exists(o.kv_disk) && !fs::is_empty(o.kv_disk)) {
    throw Error("--kv-disk " + o.kv_disk + " is not empty: a comparison starts its disk tier empty");
  }
}

Options parse_options(const cli::Args& args) {
  Options o;
  args.set_fields({{"--model", o.model},
                   {"--preset", o.preset},
                   {"--model-dir", o.model_dir},
                   {"--mode", o.mode},
                   {"--json", o.json},
                   {"--url", o.url},
                   {"--disconnect", o.disconnect},
                   {"--mmproj", o.mmproj}});
  if (!(o.disconnect >= 0.0 && o.disconnect <= 1.0)) throw Error("--disconnect must be a fraction in [0, 1]");
  args.set_fields({{"--requests", o.work.conversations}, {"--concurrency", o.concurrency}});
  if (auto r = args.get("--rate")) o.work.rate = parse_rate(*r);
  if (auto r = args.get("--prompt-len")) o.work.message_len = parse_range("--prompt-len", *r);
  if (auto r = args.get("--output-len")) o.work.output_len = parse_range("--output-len", *r);
  args.set_fields({{"--shared-prefix", o.work.shared_prefix},
                   {"--turns", o.work.turns},
                   {"--prefix-cache", o.prefix_cache},
                   {"--seed", o.work.seed},
                   {"--temp", o.temperature},
                   {"--threads", o.threads}});
  if (auto a = args.get("--agent")) {
    reject_flags_agent_sets(args);
    o.agent = parse_agent_shape(*a);
    o.work = agent_workload(*o.agent, agent_output_len(args, o.work.output_len), o.work.shared_prefix, o.work.seed);
  }
  o.kv_type = cli::cache_type_flag(args);
  args.set_fields(
      {{"--max-running", o.max_running}, {"--token-budget", o.token_budget}, {"--prefill-chunk", o.prefill_chunk}});

  if (o.model.empty() == o.preset.empty()) throw Error("give exactly one of -m MODEL and --preset NAME (see --help)");
  if (!o.preset.empty() && o.preset != "s15m" && o.preset != "s110m") {
    throw Error("--preset must be s15m or s110m, got '" + o.preset + "'");
  }
  if (o.mode != "continuous" && o.mode != "static" && o.mode != "both" && o.mode != "http") {
    throw Error("--mode must be continuous, static, both or http, got '" + o.mode + "'");
  }
  if (o.prefix_cache != "on" && o.prefix_cache != "off" && o.prefix_cache != "both") {
    throw Error("--prefix-cache must be on, off or both, got '" + o.prefix_cache + "'");
  }
  if (o.work.shared_prefix < 0)
    throw Error("--shared-prefix must be >= 0, got " + std::to_string(o.work.shared_prefix));
  require_positive("--turns", o.work.turns);
  if (o.work.turns > 1 && o.mode != "continuous")
    throw Error("--turns and --agent need --mode continuous (static batches have no replies to carry)");
  require_positive("--requests", o.work.conversations);
  require_positive("--concurrency", o.concurrency);
  require_positive("--max-running", o.max_running);
  require_positive("--token-budget", o.token_budget);
  require_positive("--prefill-chunk", o.prefill_chunk);
  if (o.mode == "http" && o.url.empty()) throw Error("--mode http needs --url");
  parse_disk_tier(args, o);
  if (!o.url.empty() && o.work.turns > 1)
    throw Error("--turns and --agent need the in-process engine (replies come back as text over HTTP)");
  if (o.threads < 0) throw Error("--threads must be >= 0, got " + std::to_string(o.threads));
  if (!(o.temperature >= 0.0f)) throw Error("--temp must be >= 0");
  o.image_paths = args.all("--image");
  if (!o.image_paths.empty()) {
    if (o.mmproj.empty()) throw Error("--image needs --mmproj F (the model's vision projector)");
    if (o.mode != "continuous" || !o.url.empty())
      throw Error("--image needs the in-process engine: --mode continuous and no --url");
  }
  return o;
}

// The --image files read, and the positions each takes in a prompt, so that the context check and
// the KV pool count them. Before any run: a file that is not an image the projector reads is an
// error now.
void read_images(Options& o, const std::string& model_path) {
  if (o.image_paths.empty()) return;
  const cli::ImageSizer sizer(o.mmproj, model_path);
  for (const std::string& path : o.image_paths) {
    o.images.push_back(cli::read_image_file(path));
    o.work.image_lengths.push_back(sizer.positions(o.images.back(), path));
  }
}

// --kv-pages, by default every client's longest request at once, plus the 1% the engine keeps
// free for growth.
void size_kv_pages(const cli::Args& args, Options& o) {
  const int64_t longest = pages_for(longest_positions(o.work));
  const int64_t need = longest * o.concurrency;
  o.kv_pages = args.number("--kv-pages", int32_t(std::min<int64_t>(need + need / 50 + 1, INT32_MAX)));
  require_positive("--kv-pages", o.kv_pages);
  if (o.mode != "continuous" && need > o.kv_pages) {
    throw Error("--kv-pages " + std::to_string(o.kv_pages) + " cannot hold a static batch of " +
                std::to_string(o.concurrency) + " requests of up to " + std::to_string(longest_positions(o.work)) +
                " positions (" + std::to_string(need) + " pages)");
  }
}

// The build directory's models/ (beside examples/, where this program is), as bench_forward uses.
fs::path default_model_dir() { return fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "models"; }

std::string resolve_model(const Options& o) {
  if (!o.model.empty()) {
    if (!fs::exists(o.model)) throw Error(o.model + ": no such file");
    return o.model;
  }
  const fs::path dir = o.model_dir.empty() ? default_model_dir() : fs::path(o.model_dir);
  const fs::path path = dir / (o.preset + ".gguf");
  if (!fs::exists(path)) {
    std::fprintf(stderr, "pagoda-loadgen: writing %s\n", path.c_str());
    fs::create_directories(dir);
    // Written aside and renamed, so a concurrent run never loads half a file.
    const fs::path partial = path.string() + ".partial." + std::to_string(getpid());
    write_synth_model(partial.string(), SynthSpec{synth_preset(o.preset), 1});
    fs::rename(partial, path);
  }
  return path.string();
}

void check_context(const WorkloadSpec& work, int32_t context_length) {
  if (longest_positions(work) > context_length) {
    throw Error("the longest prompt + output (" + std::to_string(longest_positions(work)) +
                " tokens) exceeds the model's context length " + std::to_string(context_length));
  }
}

KvTiers kv_tiers(const EngineMetrics& before, const EngineMetrics& after, bool disk_on) {
  KvTiers t;
  t.disk_on = disk_on;
  t.ram_evictions = after.kv_ram_evictions - before.kv_ram_evictions;
  t.disk_hit_tokens = after.kv_disk_hit_tokens - before.kv_disk_hit_tokens;
  t.disk_read_bytes = after.kv_disk_read_bytes - before.kv_disk_read_bytes;
  t.disk_written_bytes = after.kv_disk_written_bytes - before.kv_disk_written_bytes;
  t.disk_writes_skipped = after.kv_disk_writes_skipped - before.kv_disk_writes_skipped;
  t.disk_evictions = after.kv_disk_evictions - before.kv_disk_evictions;
  t.disk_damaged = after.kv_disk_damaged - before.kv_disk_damaged;
  t.disk_pages = after.kv_disk_pages;
  t.disk_bytes = after.kv_disk_bytes;
  t.disk_write_backlog = after.kv_disk_write_backlog;
  return t;
}

SamplingParams sampling(const Options& o) {
  SamplingParams p;
  p.temperature = o.temperature;
  p.seed = o.work.seed;
  return p;
}

// One in-process engine run: what a comparison varies, and its column's name.
struct EngineRun {
  std::string name;
  bool prefix_caching = true;
  bool disk_tier = false;
};

// The engine runs the flags ask for, in order.
std::vector<EngineRun> engine_runs(const Options& o) {
  if (o.kv_disk_compare) return {{"disk off", true, false}, {"disk on", true, true}};
  if (o.prefix_cache == "both") return {{"cache on", true, false}, {"cache off", false, false}};
  return {{"continuous", o.prefix_cache == "on", !o.kv_disk.empty()}};
}

RunSummary run_continuous(const Options& o, const std::string& model_path, const EngineRun& run) {
  EngineConfig config;
  config.prefix_caching = run.prefix_caching;
  std::optional<DiskTierDir> disk;  // before the engine, so that it outlives it
  if (run.disk_tier) {
    disk.emplace(o.kv_disk);
    config.kv_disk_path = disk->path();
    std::printf("kv disk   %s%s\n", disk->path().c_str(), o.kv_disk.empty() ? " (removed after the run)" : "");
    config.kv_disk_bytes = size_t(o.kv_disk_bytes);
  }
  config.model_path = model_path;
  config.mmproj_path = o.mmproj;
  config.threads = o.threads;
  config.kv_pages = o.kv_pages;
  config.kv_cache_type = o.kv_type;
  config.tokens_per_page = kTokensPerPage;
  config.max_tokens_per_step = o.token_budget;
  config.max_entries_per_step = o.max_running;  // room in a step for every running sequence
  config.max_running = o.max_running;
  config.prefill_chunk = o.prefill_chunk;
  const cli::LoadTimer load_timer;
  Engine engine(config);
  load_timer.report(stdout, "load      ", "continuous engine");
  check_context(o.work, engine.context_length());
  const std::vector<int32_t> bos = engine.tokenize("", engine.add_bos());
  const auto work = make_workload(o.work, engine.vocab_size(), bos);
  if (o.work.shared_prefix > 0) {
    // Steady state: a server's system prompt is cached after its first request. One untimed
    // request of the shared prefix alone warms it (in both --prefix-cache runs alike), so a
    // run with every request sent at once does not measure only the cold start.
    Request warm;
    warm.prompt_ids = work[0].prompt;
    warm.prompt_ids.resize(bos.size() + size_t(o.work.shared_prefix));
    warm.max_new_tokens = 1;
    engine.submit(std::move(warm)).get();
  }
  const EngineMetrics before = engine.metrics();
  Backend backend{
      run.name,
      [&](const std::vector<int32_t>& prompt, const Conversation& conversation) {
        Request r;
        r.prompt_ids = prompt;
        if (conversation.image >= 0) r.images = {{o.images[size_t(conversation.image)], conversation.image_at}};
        r.max_new_tokens = conversation.output_len;
        r.ignore_eos = true;
        r.sampling = sampling(o);
        // The engine's clock for a request starts once submit has laid its prompt out, which for
        // an image means decoding and resizing it on this thread: the client's clock counts that.
        const auto sent = Clock::now();
        RequestHandle handle = engine.submit(std::move(r));
        const double submit_s = seconds(Clock::now() - sent);
        const Completion c = handle.get();
        if (c.finish_reason != FinishReason::Length) {
          throw Error(std::string("a request finished with ") + finish_reason_name(c.finish_reason) + " " + c.error);
        }
        const int32_t n = int32_t(c.token_ids.size());
        return Served{submit_s + c.time_to_first_token_s,
                      n > 1 ? c.time_per_output_token_s : -1.0,
                      n,
                      c.preemptions,
                      c.token_ids,
                      false,
                      c.prompt_tokens};
      },
      [&] {
        const EngineMetrics m = engine.metrics();
        return Gauge{m.kv_pages_used, m.kv_pages_total, m.generated_tokens};
      }};
  RunSummary s = drive(backend, work, o.work.interleave_turns, o.concurrency);
  const EngineMetrics m = engine.metrics();
  s.prefix_hit_tokens = m.prefix_hit_tokens - before.prefix_hit_tokens;
  s.prefix_queried_tokens = m.prefix_queried_tokens - before.prefix_queried_tokens;
  s.kv_tiers = kv_tiers(before, m, run.disk_tier);
  return s;
}

// The same workload against a running pagoda-server (the model file gives the vocabulary the
// prompts are drawn from, so both runs send the same ids); with --disconnect, some streams are
// dropped half-way, and the server's pages must all come back.
RunSummary run_http(const Options& o, const std::string& model_path) {
  const Model model = load_model(model_path);
  check_context(o.work, model.config.context_length);
  const auto work =
      make_workload(o.work, model.config.vocab_size, model.tokenizer.encode("", model.tokenizer.add_bos()));
  const loadgen::HttpClient client(o.url);
  client.gauges();  // a clear error now if nothing answers at the URL
  std::mutex drop_mutex;
  std::mt19937_64 drops(o.work.seed ^ 0x5eedull);
  std::bernoulli_distribution drop(o.disconnect);
  Backend backend{"http",
                  [&](const std::vector<int32_t>& prompt, const Conversation& conversation) {
                    const int32_t output_len = conversation.output_len;
                    int32_t drop_after = 0;
                    {
                      std::lock_guard lock(drop_mutex);
                      if (drop(drops)) drop_after = std::max(1, output_len / 2);
                    }
                    const loadgen::StreamedCompletion c =
                        client.complete(prompt, output_len, o.temperature, o.work.seed, drop_after);
                    return Served{c.ttft_s, c.tpot_s, c.tokens, 0, {}, c.dropped};
                  },
                  [&] {
                    const loadgen::ServerGauges g = client.gauges();
                    return Gauge{g.pages_used, g.pages_total, g.generated_tokens};
                  }};
  RunSummary summary = drive(backend, work, o.work.interleave_turns, o.concurrency);
  // Dropped streams are cancelled as the server notices the closed connections.
  loadgen::ServerGauges after = client.gauges();
  for (int i = 0; i < 200 && (after.pages_used > 0 || after.running > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    after = client.gauges();
  }
  std::printf("server    after the http run: %lld of %lld KV pages in use, %lld requests running\n",
              (long long)after.pages_used, (long long)after.pages_total, (long long)after.running);
  return summary;
}

RunSummary run_static(const Options& o, const std::string& model_path) {
  const cli::LoadTimer load_timer;
  const Model model = load_model(model_path);
  ModelRunner runner(model, o.threads);
  load_timer.report(stdout, "load      ", "static batcher");
  check_context(o.work, model.config.context_length);
  const auto work =
      make_workload(o.work, model.config.vocab_size, model.tokenizer.encode("", model.tokenizer.add_bos()));
  StaticBatcher batcher(runner, o.kv_pages, kTokensPerPage, o.kv_type, o.concurrency, o.work.conversations,
                        sampling(o));
  Backend backend{"static",
                  [&](const std::vector<int32_t>& prompt, const Conversation& conversation) {
                    const auto sent = Clock::now();
                    const TokenTimes t = batcher.submit(prompt, conversation.output_len).get();
                    const double tpot = t.tokens > 1 ? seconds(t.last - t.first) / double(t.tokens - 1) : -1.0;
                    return Served{seconds(t.first - sent), tpot, t.tokens, 0, {}};
                  },
                  [&] {
                    return Gauge{batcher.pages_used(), batcher.pages_total(), batcher.generated_tokens()};
                  }};
  return drive(backend, work, o.work.interleave_turns, o.concurrency);
}

std::string range_text(const Range& r) { return std::to_string(r.lo) + ":" + std::to_string(r.hi); }
std::string rate_text(double rate) { return std::isinf(rate) ? "inf" : format("%g/s", rate); }

// The tokens of every conversation's last context, against the RAM pool's: above 1, the prefix
// cache alone cannot keep them all.
int64_t agent_context_tokens(const Options& o) { return o.work.conversations * longest_positions(o.work); }
double agent_contexts_over_pool(const Options& o) {
  return double(agent_context_tokens(o)) / (double(o.kv_pages) * kTokensPerPage);
}

void print_agent_header(const Options& o) {
  std::printf(
      "agent     %lld conversations x %d turns, interleaved; messages of %d tokens, replies of %d: contexts to %d\n",
      (long long)o.work.conversations, o.work.turns, o.work.message_len.lo, o.work.output_len.lo,
      longest_positions(o.work));
  const double over_pool = agent_contexts_over_pool(o);
  std::printf("          their contexts %lld tokens in all, %.2fx the KV pool%s\n", (long long)agent_context_tokens(o),
              over_pool, over_pool <= 1.0 ? ": the RAM prefix cache can keep them all (see --kv-pages)" : "");
}

void print_header(const Options& o, const std::string& model_path, double load_at_start) {
  std::printf("model     %s\n", model_path.c_str());
  std::printf("load      1-minute average %.2f at the start\n", load_at_start);
  if (o.agent) print_agent_header(o);
  std::printf("workload  %lld %s, rate %s, concurrency %d, prompt %s, output %s, seed %llu, temp %g\n",
              (long long)o.work.conversations, o.work.turns > 1 ? "conversations" : "requests",
              rate_text(o.work.rate).c_str(), o.concurrency, range_text(o.work.message_len).c_str(),
              range_text(o.work.output_len).c_str(), (unsigned long long)o.work.seed, double(o.temperature));
  std::printf("          shared prefix %d tokens, %d turn%s, prefix cache %s\n", o.work.shared_prefix, o.work.turns,
              o.work.turns == 1 ? "" : "s", o.prefix_cache.c_str());
  if (!o.images.empty()) {
    const auto [fewest, most] = std::minmax_element(o.work.image_lengths.begin(), o.work.image_lengths.end());
    std::printf("          %zu image%s (%d to %d prompt positions each; one a request, after the shared prefix), %s\n",
                o.images.size(), o.images.size() == 1 ? "" : "s", *fewest, *most, o.mmproj.c_str());
  }
  std::printf("engine    threads %s, kv-pages %d x %d tokens (%s), max-running %d, token-budget %d, prefill-chunk %d\n",
              o.threads ? std::to_string(o.threads).c_str() : "all", o.kv_pages, kTokensPerPage,
              kv_cache_type_name(o.kv_type), o.max_running, o.token_budget, o.prefill_chunk);
  if (!o.kv_disk.empty() || o.kv_disk_compare) {
    std::printf("kv disk   %s, up to %.1f GiB%s\n", o.kv_disk.empty() ? "a fresh directory" : o.kv_disk.c_str(),
                double(o.kv_disk_bytes) / double(1ull << 30),
                o.kv_disk_compare ? "; runs without it, then with it" : "");
  }
  std::printf("\n");
}

const RunSummary* find_run(const std::vector<RunSummary>& runs, const std::string& mode) {
  for (const RunSummary& s : runs) {
    if (s.mode == mode) return &s;
  }
  return nullptr;
}

void write_json(const Options& o, const std::string& model_path, double load_at_start,
                const std::vector<RunSummary>& runs) {
  nlohmann::json j;
  j["model"] = model_path;
  j["load_average_at_start"] = load_at_start;
  j["workload"] = {{"requests", o.work.conversations},
                   {"rate", rate_text(o.work.rate)},
                   {"concurrency", o.concurrency},
                   {"prompt_len", range_text(o.work.message_len)},
                   {"output_len", range_text(o.work.output_len)},
                   {"seed", o.work.seed},
                   {"temperature", o.temperature},
                   {"shared_prefix", o.work.shared_prefix},
                   {"turns", o.work.turns},
                   {"prefix_cache", o.prefix_cache}};
  if (!o.images.empty()) {
    j["workload"]["images"] = {{"files", o.image_paths}, {"positions", o.work.image_lengths}, {"mmproj", o.mmproj}};
  }
  if (o.agent) {
    j["workload"]["agent"] = {{"conversations", o.agent->conversations},
                              {"turns", o.agent->turns},
                              {"context", o.agent->context},
                              {"message_len", o.work.message_len.lo},
                              {"context_tokens", agent_context_tokens(o)},
                              {"contexts_over_kv_pool", agent_contexts_over_pool(o)}};
  }
  j["engine"] = {{"threads", o.threads},
                 {"kv_pages", o.kv_pages},
                 {"tokens_per_page", kTokensPerPage},
                 {"cache_type", kv_cache_type_name(o.kv_type)},
                 {"max_running", o.max_running},
                 {"token_budget", o.token_budget},
                 {"prefill_chunk", o.prefill_chunk}};
  if (!o.kv_disk.empty() || o.kv_disk_compare) {
    j["engine"]["kv_disk"] = {{"path", o.kv_disk}, {"bytes", o.kv_disk_bytes}, {"compare", o.kv_disk_compare}};
  }
  for (const RunSummary& s : runs) j["runs"][s.mode] = to_json(s);
  if (const RunSummary* st = find_run(runs, "static")) j["continuous_over_static"] = to_json(compare(runs[0], *st));
  if (const RunSummary* off = find_run(runs, "cache off")) j["cache_on_over_off"] = to_json(compare(runs[0], *off));
  if (const RunSummary* on = find_run(runs, "disk on")) j["disk_on_over_off"] = to_json(compare(*on, runs[0]));
  std::ofstream out(o.json);
  out << j.dump(2) << "\n";
  if (!out) throw Error(o.json + ": cannot write");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    cli::Args args(
        argc, argv,
        {"--model",        "--preset",        "--model-dir",  "--mode",          "--requests",   "--concurrency",
         "--rate",         "--prompt-len",    "--output-len", "--shared-prefix", "--turns",      "--prefix-cache",
         "--seed",         "--temp",          "--threads",    "--cache-type",    "--kv-pages",   "--max-running",
         "--token-budget", "--prefill-chunk", "--json",       "--url",           "--disconnect", "--agent",
         "--kv-disk",      "--kv-disk-size",  "--mmproj",     "--image"},
        {"--help", "--kv-disk-compare"}, {{"-n", "--requests"}, {"-c", "--concurrency"}});
    if (args.has("--help")) {
      std::cout << kUsage;
      return 0;
    }
    Options o = parse_options(args);
    const std::string model_path = resolve_model(o);
    read_images(o, model_path);
    size_kv_pages(args, o);
    const double load_at_start = load_average();
    std::vector<RunSummary> runs;
    if (o.mode != "static" && o.mode != "http") {
      for (const EngineRun& run : engine_runs(o)) runs.push_back(run_continuous(o, model_path, run));
    }
    if (o.mode == "static" || o.mode == "both") runs.push_back(run_static(o, model_path));
    if (!o.url.empty()) runs.push_back(run_http(o, model_path));
    print_header(o, model_path, load_at_start);
    print_table(runs);
    if (o.work.turns > 1) {
      print_later_turns(runs);
      print_turns(runs);
    }
    print_kv_tiers(runs);
    if (const RunSummary* st = find_run(runs, "static")) print_ratio(compare(runs[0], *st), "continuous", "static");
    if (const RunSummary* off = find_run(runs, "cache off"))
      print_ratio(compare(runs[0], *off), "cache on", "cache off");
    if (const RunSummary* on = find_run(runs, "disk on")) print_ratio(compare(*on, runs[0]), "disk on", "disk off");
    if (const RunSummary* http = find_run(runs, "http"); http && runs.size() > 1) {
      std::printf("http over in-process: %.3f x the tokens/s\n", http->tokens_per_s / runs[0].tokens_per_s);
    }
    if (!o.json.empty()) write_json(o, model_path, load_at_start, runs);
    int64_t failed = 0;
    for (const RunSummary& s : runs) {
      if (s.failed == 0) continue;
      failed += s.failed;
      std::fprintf(stderr, "pagoda-loadgen: %s: %lld of %lld requests failed; the first: %s\n", s.mode.c_str(),
                   (long long)s.failed, (long long)(s.failed + s.requests), s.first_error.c_str());
    }
    return failed == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pagoda-loadgen: %s\n", e.what());
    return 1;
  }
}
