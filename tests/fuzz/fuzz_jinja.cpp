// The Jinja2 chat template interpreter on arbitrary template text, rendered with a small fixed
// conversation (a system turn, tools, an assistant tool call, a tool result) under tight
// sandbox limits. Parsing and rendering must end with output or a pagoda::Error: no crash, no
// hang, no unbounded memory.

#include <string>

#include <nlohmann/json.hpp>

#include "engine/chat/jinja/template.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

const nlohmann::ordered_json& context() {
  static const nlohmann::ordered_json c = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Zürich?"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2, "hourly": false}}}]},
      {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"t\": 21.5}"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false})");
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  pagoda::jinja::Limits limits;
  limits.max_steps = 200000;
  limits.max_output = 1 << 20;
  limits.max_call_depth = 16;
  pagoda::fuzz::expect_clean([&] {
    const pagoda::jinja::Template t(source);
    const std::string out = t.render(context(), limits);
    if (out.size() > limits.max_output) std::abort();
  });
  return 0;
}
