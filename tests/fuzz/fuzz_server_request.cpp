// pagoda-server's request mapping on arbitrary bytes: an OpenAI /v1/completions or
// /v1/chat/completions body (the first byte's low bit picks which), or with its third bit an
// Anthropic /v1/messages body, with its fourth an OpenAI /v1/responses body (both translated to
// a chat body first) → a pagoda::Request. Every
// input is either a Request the engine accepts or an ApiError with an HTTP status and a
// message; the Request it builds must then pass Engine::submit's own validation.
// With the first byte's second bit, the rest is nested instead, structure-aware: the second
// byte picks a field that takes JSON (a message's content, a schema, tool parameters, template
// kwargs) and the third how deep (up to 65,280 levels); the rest of the bytes go innermost.
// Past --max-json-depth the answer must be the depth 400, never a crash.

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "testing/synth.h"
#include "examples/server/api_error.h"
#include "examples/server/api_request.h"
#include "examples/server/json_body.h"
#include "examples/server/openai_request.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

pagoda::Engine& engine() {
  static const std::unique_ptr<pagoda::Engine> e = [] {
    const std::string path = "/tmp/pagoda-fuzz-server-" + std::to_string(getpid()) + ".gguf";
    pagoda::SynthSpec spec;
    pagoda::ModelConfig& c = spec.config;
    c.dim = 32, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 1, c.ffn_dim = 32;
    c.vocab_size = 512, c.context_length = 64;
    pagoda::write_synth_model(path, spec);
    auto made = std::make_unique<pagoda::Engine>(pagoda::EngineConfig{.model_path = path, .threads = 1});
    std::filesystem::remove(path);
    return made;
  }();
  return *e;
}

// A body with `inner` nested `depth` levels deep (arrays and objects by turns) in one field.
std::string deep_body(uint8_t field, size_t depth, const std::string& inner) {
  std::string open, close;
  for (size_t i = 0; i < depth; ++i) {
    open += i % 2 ? "{\"k\":" : "[";
    close += i % 2 ? "}" : "]";
  }
  const std::string nest = open + (inner.empty() ? "0" : inner) + std::string(close.rbegin(), close.rend());
  static const char* const kFields[] = {
      R"({"messages":[{"role":"user","content":@}]})",
      R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":@}}})",
      R"({"prompt":"x","json_schema":@})",
      R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":@}}]})",
      R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":@})",
      R"({"prompt":@})",
      R"({"max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":@}]}]})",
      R"({"max_tokens":4,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f","input_schema":@}]})",
  };
  std::string body = kFields[field % std::size(kFields)];
  return body.replace(body.find('@'), 1, nest);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static pagoda::server::ModelNames names("tiny");
  using pagoda::server::Endpoint;
  const Endpoint endpoint = data[0] & 8   ? Endpoint::Responses
                            : data[0] & 4 ? Endpoint::Messages
                            : data[0] & 1 ? Endpoint::ChatCompletions
                                          : Endpoint::Completions;
  std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  size_t depth = 0;
  if ((data[0] & 2) && size >= 3) {
    depth = size_t(data[2]) * 256;
    body = deep_body(data[1], depth, std::string(reinterpret_cast<const char*>(data + 3), size - 3));
  }
  try {
    pagoda::server::ApiRequest parsed = pagoda::server::parse_request(endpoint, body, engine(), names);
    if (depth > size_t(pagoda::server::max_json_depth())) std::abort();  // accepted past the bound
    // What the mapping accepted goes to the engine, which may still refuse it with a clear
    // error (a schema it cannot compile: the server answers 400); else it is cancelled unrun.
    try {
      pagoda::RequestHandle handle = engine().submit(std::move(parsed.request));
      handle.cancel();
      (void)handle.get();
    } catch (const pagoda::Error&) {
    }
  } catch (const pagoda::server::ApiError& e) {
    if (e.status() < 400 || e.status() > 599) std::abort();
  }
  return 0;
}
