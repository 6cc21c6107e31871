// pagoda-server: the OpenAI-compatible HTTP API over one Engine.
//   pagoda-server -m model.gguf --port 8080 [--lora NAME=PATH] [--api-key KEY]
//   curl localhost:8080/v1/completions -d '{"prompt": "Once upon a time", "max_tokens": 32}'

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>

#include "examples/common/args.h"
#include "examples/common/cache_type_flag.h"
#include "examples/common/chat_template_flag.h"
#include "examples/common/default_model.h"
#include "examples/common/kv_tier_flags.h"
#include "examples/common/lora_flag.h"
#include "examples/common/speculative_flags.h"
#include "examples/server/http_server.h"
#include "examples/server/json_body.h"
#include "examples/server/model_names.h"
#include "examples/server/routes.h"
#include "examples/server/server_metrics.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"

namespace {

constexpr const char* kUsage = R"(usage: pagoda-server [-m MODEL] [options]
Serves a model over HTTP with OpenAI's API: POST /v1/completions, POST /v1/chat/completions
(both streaming with "stream": true), GET /v1/models, POST /v1/load_lora_adapter and
/v1/unload_lora_adapter (vLLM's), GET /health, GET /metrics (Prometheus), and a chat page at /.
A request's "model" names the base model or a loaded LoRA adapter.

  -m, --model PATH        GGUF file, or llama2.c checkpoint (.bin). Without it: the random-weight
                          s15m model pagoda-chat uses (its text means nothing)
  --tokenizer PATH        llama2.c tokenizer.bin
  --served-model-name N   the base model's name in the API (default: the model file's name)
  -c, --ctx-size N        KV cache size in tokens, shared by all requests (default: 512 MiB of
                          cache); the cache is made resident at start
  -t, --threads N         compute threads (default: all cores)
  --no-mmap               read the model into memory instead of mapping it (llama.cpp's
                          flag): costs its size in RSS, and the file may then change freely
  --max-running N         sequences decoded at once (default 256)
  --cache-type T          KV cache type: f32, f16 (default), bf16 or q8_0
  --lora NAME=PATH[:SCALE]  load a LoRA adapter at start (repeatable)
  --chat-template-file F  lay chats out with this Jinja chat template instead of the model's own
  --mmproj F              the model's vision projector (llama.cpp's mmproj GGUF): chats may hold
                          images (image_url parts with data URLs; input_image; Anthropic image blocks)
  --host ADDR             address to listen on (default 127.0.0.1)
  --port N                port (default 8080; 0 = any free port, printed on stderr)
  --api-key KEY           require the key on every route but /health, /metrics and the chat page
                          at / (also $PAGODA_API_KEY), as "Authorization: Bearer KEY" or
                          "x-api-key: KEY"
  --metrics-key KEY       require this key on /metrics too (default: /metrics is open)
  --max-body BYTES        largest request body; larger ones get 413 (default 1048576)
  --max-json-depth N      deepest nesting of a JSON body; deeper ones get 400 (default 128)
  --header-timeout S      seconds a client has to send a whole request head (default 10)
  --body-timeout S        seconds a client has to send a whole request body (default 30)
  --idle-timeout S        seconds a kept-alive connection may wait between requests (default 5)
  --write-timeout S       seconds each write to a client may take, a stream's chunks too;
                          a client that stops reading longer is dropped (default 30)
  --max-connections N     open connections at once; more get 503 and are closed (default 1024)
  --max-connections-per-ip N  open connections from one address (default 512: half of the
                          total, so one client cannot take them all; behind a reverse proxy,
                          whose address every connection has, set it to --max-connections)
  --http-threads N        most requests handled at once (each generation holds a worker thread,
                          started for it and ended after it); more wait (default 512). Reading
                          and writing connections takes 2 threads whatever their number
  --shutdown-timeout S    on SIGINT or SIGTERM, seconds running requests get to finish
                          (default 30); see below
  --no-webui              no chat page at / (it answers 404)
  --special-in-content    parse control tokens typed into chat messages ("<|im_end|>", "</s>")
                          as control tokens, as before pagoda kept message data as text; only
                          for trusted clients (a user could then end a turn or forge one)
  -h, --help              this text
The server listens at once and loads the model meanwhile: /health answers 503 {"status":
"loading"} until it can serve, then 200 {"status": "ok"}.
SIGINT or SIGTERM: new requests (and /health) get 503 with Connection: close; running ones get
--shutdown-timeout seconds to finish; then the rest are cancelled (an open stream ends with
finish_reason "length" and data: [DONE]) and the server exits, at most 2 s later.
)";

constexpr int32_t kTokensPerPage = 16;
// Threads reading and writing every connection: the work on them is parsing and copying.
constexpr size_t kIoThreads = 2;

struct Options {
  pagoda::EngineConfig engine;
  std::string served_name;
  std::vector<pagoda::cli::LoraFlag> loras;
  std::string host = "127.0.0.1";
  int port = 8080;
  pagoda::server::RouteOptions routes;
  pagoda::server::HttpLimits limits;
  size_t http_threads = 512;
  int max_json_depth = pagoda::server::kDefaultMaxJsonDepth;
  std::chrono::milliseconds shutdown_timeout{30000};
};

// A positive number of seconds, as milliseconds.
std::chrono::milliseconds seconds_flag(const pagoda::cli::Args& args, const std::string& flag,
                                       std::chrono::milliseconds fallback) {
  const double seconds = args.number<double>(flag, double(fallback.count()) / 1000.0);
  if (!(seconds > 0.0) || seconds > 86400.0) throw pagoda::Error(flag + " must be a number of seconds above 0");
  return std::chrono::milliseconds(int64_t(seconds * 1000.0));
}

Options parse_options(const pagoda::cli::Args& args) {
  Options o;
  if (auto model = args.get("--model")) {
    o.engine.model_path = *model;
  } else {
    o.engine.model_path = pagoda::cli::ensure_default_model().path;
    std::fprintf(stderr, "pagoda-server: no -m given, serving %s (random weights; its text means nothing)\n",
                 o.engine.model_path.c_str());
  }
  o.engine.tokenizer_path = args.get("--tokenizer", "");
  o.engine.threads = args.number("--threads", 0);
  o.engine.use_mmap = !args.has("--no-mmap");
  o.engine.chat_template = pagoda::cli::chat_template_flag(args);
  o.engine.mmproj_path = args.get("--mmproj", "");
  o.engine.tokens_per_page = kTokensPerPage;
  o.engine.kv_cache_type = pagoda::cli::cache_type_flag(args);
  o.engine.kv_prefault = true;  // a server claims its KV cache at start, as llama-server does
  o.engine.max_running = args.number<int32_t>("--max-running", o.engine.max_running);
  o.engine.speculative = pagoda::cli::speculative_from_flags(args);
  o.engine.draft_model_path = pagoda::cli::draft_model_from_flags(args);
  pagoda::cli::kv_tier_flags(args).apply(o.engine);
  if (const int64_t ctx = args.number<int64_t>("--ctx-size", 0); ctx < 0) {
    throw pagoda::Error("-c must be a token count");
  } else if (ctx > 0) {
    o.engine.kv_pages = int32_t((ctx + kTokensPerPage - 1) / kTokensPerPage);
  }
  o.served_name = args.get("--served-model-name", std::filesystem::path(o.engine.model_path).filename().string());
  for (const std::string& flag : args.all("--lora")) o.loras.push_back(pagoda::cli::parse_lora(flag));
  o.host = args.get("--host", o.host);
  o.port = args.number("--port", o.port);
  if (o.port < 0 || o.port > 65535) throw pagoda::Error("--port must be 0..65535");
  const char* env_key = std::getenv("PAGODA_API_KEY");
  o.routes.api_key = args.get("--api-key", env_key ? env_key : "");
  o.routes.metrics_key = args.get("--metrics-key", "");
  o.routes.webui = !args.has("--no-webui");
  o.routes.special_in_content = args.has("--special-in-content");
  pagoda::server::HttpLimits& l = o.limits;
  l.max_body = args.number<size_t>("--max-body", l.max_body);
  if (l.max_body == 0) throw pagoda::Error("--max-body must be positive");
  l.header_timeout = seconds_flag(args, "--header-timeout", l.header_timeout);
  l.body_timeout = seconds_flag(args, "--body-timeout", l.body_timeout);
  l.idle_timeout = seconds_flag(args, "--idle-timeout", l.idle_timeout);
  l.write_timeout = seconds_flag(args, "--write-timeout", l.write_timeout);
  l.max_connections = args.number<size_t>("--max-connections", l.max_connections);
  l.max_connections_per_ip =
      args.number<size_t>("--max-connections-per-ip", std::min(l.max_connections_per_ip, l.max_connections));
  if (l.max_connections == 0 || l.max_connections_per_ip == 0)
    throw pagoda::Error("--max-connections* must be positive");
  o.max_json_depth = args.number<int>("--max-json-depth", o.max_json_depth);
  if (o.max_json_depth <= 0) throw pagoda::Error("--max-json-depth must be positive");
  o.http_threads = args.number<size_t>("--http-threads", o.http_threads);
  if (o.http_threads == 0) throw pagoda::Error("--http-threads must be positive");
  o.shutdown_timeout = seconds_flag(args, "--shutdown-timeout", o.shutdown_timeout);
  return o;
}

// Polls until nothing is in flight or `deadline` passes; whether nothing is.
bool wait_idle(const pagoda::server::HttpServer& http, std::chrono::steady_clock::time_point deadline) {
  while (http.in_flight() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::array kOwnFlags{"--model",
                               "--tokenizer",
                               "--served-model-name",
                               "--ctx-size",
                               "--threads",
                               "--max-running",
                               "--cache-type",
                               "--lora",
                               "--host",
                               "--port",
                               "--api-key",
                               "--metrics-key",
                               "--max-body",
                               "--max-json-depth",
                               "--header-timeout",
                               "--body-timeout",
                               "--idle-timeout",
                               "--write-timeout",
                               "--max-connections",
                               "--max-connections-per-ip",
                               "--http-threads",
                               "--shutdown-timeout",
                               "--chat-template-file",
                               "--mmproj"};
    const pagoda::cli::Args args(
        argc, argv, pagoda::cli::flag_set({kOwnFlags, pagoda::cli::kSpeculativeFlags, pagoda::cli::kKvTierFlags}),
        {"--help", "--no-mmap", "--no-webui", "--spec-ngram", "--special-in-content"});
    if (args.has("--help")) {
      std::cout << kUsage << pagoda::cli::kSpeculativeUsage << pagoda::cli::kKvTierUsage;
      return 0;
    }
    const Options opt = parse_options(args);
    pagoda::server::set_max_json_depth(opt.max_json_depth);

    // Before any thread starts, so every thread inherits the mask and only main gets them.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    ::signal(SIGPIPE, SIG_IGN);  // a client that left is a failed write, not a dead server

    pagoda::server::ModelNames names(opt.served_name);
    pagoda::server::ServerMetrics metrics;
    pagoda::server::Routes routes(names, metrics, opt.routes);
    pagoda::server::HttpServer http(
        opt.limits, [&routes](const pagoda::server::HttpRequest& req) { return routes.handle(req); },
        pagoda::server::Routes::blocks, opt.http_threads, kIoThreads);
    const int port = http.listen(opt.host, opt.port);
    http.start();
    // Listening before the model loads: a balancer sees "loading" on /health, not a refusal.
    std::fprintf(stderr, "pagoda-server: listening on http://%s:%d, loading %s\n", opt.host.c_str(), port,
                 opt.engine.model_path.c_str());

    std::unique_ptr<pagoda::Engine> engine;
    std::thread loader([&] {
      try {
        engine = std::make_unique<pagoda::Engine>(opt.engine);
        for (const pagoda::cli::LoraFlag& lora : opt.loras) {
          engine->load_adapter(lora.name, lora.path, lora.scale);
          names.add_adapter(lora.name, lora.path);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "pagoda-server: %s\n", e.what());
        std::_Exit(1);  // nothing was served; the HTTP threads need no goodbye
      }
      routes.set_engine(*engine);
      std::fprintf(stderr, "pagoda-server: %s (chat format %s, %s KV cache) ready\n", opt.served_name.c_str(),
                   engine->chat_format().family.c_str(), pagoda::kv_cache_type_name(opt.engine.kv_cache_type));
    });

    int signal = 0;
    sigwait(&signals, &signal);
    const auto stop_at = std::chrono::steady_clock::now() + opt.shutdown_timeout;
    std::fprintf(stderr, "pagoda-server: %s, shutting down\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
    routes.begin_shutdown();
    http.begin_drain();
    if (!wait_idle(http, stop_at)) {
      std::fprintf(stderr, "pagoda-server: --shutdown-timeout passed, cancelling %zu requests\n", http.in_flight());
      // Only once loaded: the loader hands `engine` over by set_engine, an atomic store.
      if (routes.has_engine()) engine->shutdown();
    }
    // Cancelled streams write their last chunks within moments; a client that does not read
    // them is not waited for past the bound.
    const bool idle = wait_idle(http, stop_at + std::chrono::milliseconds(1500));
    http.stop(idle);
    if (!idle || !routes.has_engine()) {
      std::fflush(nullptr);
      std::_Exit(0);  // a worker or the loader still runs: no destructor may pull things from under it
    }
    loader.join();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pagoda-server: %s\n", e.what());
    return 1;
  }
}
