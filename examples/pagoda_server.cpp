// pagoda-server: the OpenAI-compatible HTTP API over one Engine.
//   pagoda-server -m model.gguf --port 8080 [--lora NAME=PATH] [--api-key KEY]
//   curl localhost:8080/v1/completions -d '{"prompt": "Once upon a time", "max_tokens": 32}'

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>

#include <httplib.h>

#include "examples/common/args.h"
#include "examples/common/cache_type_flag.h"
#include "examples/common/chat_template_flag.h"
#include "examples/common/default_model.h"
#include "examples/common/lora_flag.h"
#include "examples/common/speculative_flags.h"
#include "examples/server/access_log.h"
#include "examples/server/listen_backlog.h"
#include "examples/server/model_names.h"
#include "examples/server/routes.h"
#include "examples/server/server_metrics.h"
#include "examples/server/worker_pool.h"
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
  --host ADDR             address to listen on (default 127.0.0.1)
  --port N                port (default 8080; 0 = any free port, printed on stderr)
  --api-key KEY           require "Authorization: Bearer KEY" on /v1/ (also $PAGODA_API_KEY);
                          /health and /metrics stay open
  --max-body BYTES        largest request body; larger ones get 413 (default 1048576)
  --no-webui              no chat page at / (it answers 404)
  --http-threads N        most HTTP worker threads: each open connection holds one, started
                          when it comes and ended after it; more connections wait (default 512)
  -h, --help              this text
SIGINT or SIGTERM: new requests get 503, running ones get up to 10 s to finish, then stop.
)";

constexpr int32_t kTokensPerPage = 16;

struct Options {
  pagoda::EngineConfig engine;
  std::string served_name;
  std::vector<pagoda::cli::LoraFlag> loras;
  std::string host = "127.0.0.1";
  int port = 8080;
  pagoda::server::RouteOptions routes;
  size_t http_threads = 512;
};

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
  o.engine.tokens_per_page = kTokensPerPage;
  o.engine.kv_cache_type = pagoda::cli::cache_type_flag(args);
  o.engine.kv_prefault = true;  // a server claims its KV cache at start, as llama-server does
  o.engine.max_running = args.number<int32_t>("--max-running", o.engine.max_running);
  o.engine.speculative = pagoda::cli::speculative_from_flags(args);
  o.engine.draft_model_path = pagoda::cli::draft_model_from_flags(args);
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
  o.routes.max_body = args.number<size_t>("--max-body", 1 << 20);
  if (o.routes.max_body == 0) throw pagoda::Error("--max-body must be positive");
  o.routes.webui = !args.has("--no-webui");
  o.http_threads = args.number<size_t>("--http-threads", o.http_threads);
  if (o.http_threads == 0) throw pagoda::Error("--http-threads must be positive");
  return o;
}

// Waits for SIGINT or SIGTERM (blocked in every thread, so only this one takes them), then
// refuses new work, gives running requests a grace period, cancels the rest and stops httplib.
void shut_down_on_signal(httplib::Server& http, pagoda::server::Routes& routes, pagoda::Engine& engine, sigset_t signals) {
  int signal = 0;
  sigwait(&signals, &signal);
  std::fprintf(stderr, "pagoda-server: %s, shutting down\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
  routes.begin_shutdown();
  for (int waited_ms = 0; waited_ms < 10000; waited_ms += 50) {
    const pagoda::EngineMetrics m = engine.metrics();
    if (m.queued == 0 && m.running == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  engine.shutdown();
  http.stop();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const pagoda::cli::Args args(argc, argv,
                                 {"--model", "--tokenizer", "--served-model-name", "--ctx-size", "--threads", "--max-running",
                                  "--cache-type", "--lora", "--host", "--port", "--api-key", "--max-body", "--http-threads",
                                  "--chat-template-file", "--draft-max", "--draft-min", "--spec-ngram-max", "--spec-ngram-min", "--model-draft", "--draft-p-min", "--draft-probe"},
                                 {"--help", "--no-mmap", "--no-webui", "--spec-ngram"},
                                 {{"-m", "--model"}, {"-c", "--ctx-size"}, {"-t", "--threads"}, {"-h", "--help"},
                                  {"--lookup", "--spec-ngram"}, {"-md", "--model-draft"}});
    if (args.has("--help")) {
      std::cout << kUsage << pagoda::cli::kSpeculativeUsage;
      return 0;
    }
    const Options opt = parse_options(args);

    // Before any thread starts, so every thread inherits the mask and only the waiter gets them.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    ::signal(SIGPIPE, SIG_IGN);  // a client that left is a failed write, not a dead server

    pagoda::Engine engine(opt.engine);
    pagoda::server::ModelNames names(opt.served_name);
    for (const pagoda::cli::LoraFlag& lora : opt.loras) {
      engine.load_adapter(lora.name, lora.path, lora.scale);
      names.add_adapter(lora.name, lora.path);
    }
    pagoda::server::ServerMetrics metrics;
    pagoda::server::Routes routes(engine, names, metrics, opt.routes);

    httplib::Server http;
    const size_t workers = opt.http_threads;
    http.new_task_queue = [workers] { return new pagoda::server::WorkerPool(workers); };
    http.set_logger(pagoda::server::log_access);
    http.set_keep_alive_timeout(5);
    routes.install(http);

    const pagoda::server::ListenBacklog backlog(http);
    const int port = opt.port == 0 ? http.bind_to_any_port(opt.host) : (http.bind_to_port(opt.host, opt.port) ? opt.port : -1);
    if (port < 0) throw pagoda::Error("cannot listen on " + opt.host + ":" + std::to_string(opt.port));
    backlog.raise();
    std::fprintf(stderr, "pagoda-server: %s (chat format %s, %s KV cache) listening on http://%s:%d\n",
                 opt.served_name.c_str(), engine.chat_format().family.c_str(), pagoda::kv_cache_type_name(opt.engine.kv_cache_type),
                 opt.host.c_str(), port);
    std::thread waiter(shut_down_on_signal, std::ref(http), std::ref(routes), std::ref(engine), signals);
    http.listen_after_bind();
    pthread_kill(waiter.native_handle(), SIGTERM);  // wakes the waiter if httplib stopped on its own
    waiter.join();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pagoda-server: %s\n", e.what());
    return 1;
  }
}
