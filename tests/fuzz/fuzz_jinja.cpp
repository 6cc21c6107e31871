// The Jinja2 chat template interpreter on arbitrary template text, rendered with a small fixed
// conversation (a system turn, tools, an assistant tool call, a tool result) under tight
// sandbox limits. Parsing and rendering must end with output or a pagoda::Error: no crash, no
// hang, no unbounded memory; the output's data spans must be well formed.
//
// The input is the template text; after a NUL byte, a program building a `deep` context value
// (deep and wide JSON, see fuzz_structures.h); after a second NUL, one that wraps the template
// in nested constructs. Inputs without NUL are plain templates.

#include <string>

#include <nlohmann/json.hpp>

#include "engine/jinja/template.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_structures.h"

namespace {

const nlohmann::ordered_json& context() {
  static const nlohmann::ordered_json c = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Zürich?<|im_end|>"},
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
  const auto parts = pagoda::fuzz::split_at_nul(std::string_view(reinterpret_cast<const char*>(data), size));
  const std::string source = parts.size() > 2 ? pagoda::fuzz::nest_template(parts[2], parts[0]) : std::string(parts[0]);
  nlohmann::ordered_json c = context();
  if (parts.size() > 1) c["deep"] = pagoda::fuzz::build_json(parts[1]);
  pagoda::jinja::Limits limits;
  limits.max_steps = 200000;
  limits.max_output = 1 << 20;
  limits.max_call_depth = 16;
  pagoda::fuzz::expect_clean([&] {
    const pagoda::jinja::Template t(source);
    const pagoda::ChatPrompt out = t.render_with_spans(c, {"messages", "tools", "deep"}, limits);
    if (out.text.size() > limits.max_output) std::abort();
    pagoda::fuzz::check_spans(out);
  });
  return 0;
}
