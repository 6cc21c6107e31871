// pagoda-server's request mapping on arbitrary bytes: an OpenAI /v1/completions or
// /v1/chat/completions body (the first byte picks which) → a pagoda::Request. Every input is
// either a Request the engine accepts or an ApiError with an HTTP status and a message; the
// Request it builds must then pass Engine::submit's own validation.

#include <unistd.h>

#include <filesystem>
#include <memory>

#include "engine/synth/synth.h"
#include "examples/server/api_error.h"
#include "examples/server/openai_request.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

pagoda::Engine& engine() {
  static const std::unique_ptr<pagoda::Engine> e = [] {
    const std::string path = "/tmp/pagoda-fuzz-server-" + std::to_string(getpid()) + ".gguf";
    pagoda::SynthSpec spec;
    spec.config.dim = 32;
    spec.config.n_layers = 1;
    spec.config.n_heads = 2;
    spec.config.n_kv_heads = 1;
    spec.config.ffn_dim = 32;
    spec.config.vocab_size = 512;
    spec.config.context_length = 64;
    pagoda::write_synth_model(path, spec);
    auto made = std::make_unique<pagoda::Engine>(pagoda::EngineConfig{.model_path = path, .threads = 1});
    std::filesystem::remove(path);
    return made;
  }();
  return *e;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static pagoda::server::ModelNames names("tiny");
  const auto endpoint = data[0] & 1 ? pagoda::server::Endpoint::ChatCompletions : pagoda::server::Endpoint::Completions;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    pagoda::server::ApiRequest parsed = pagoda::server::parse_api_request(endpoint, body, engine(), names);
    // What the mapping accepted, the engine must accept too; then it is cancelled unrun.
    pagoda::RequestHandle handle = engine().submit(std::move(parsed.request));
    handle.cancel();
    (void)handle.get();
  } catch (const pagoda::server::ApiError& e) {
    if (e.status() < 400 || e.status() > 599) std::abort();
  }
  return 0;
}
