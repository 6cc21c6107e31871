#pragma once
// Tool calls in the layouts models are trained to write them in, as OpenAI-compatible servers
// (llama-server, vLLM) handle them: which layout a chat template uses, a GBNF grammar that
// admits only well-formed calls of the given tools (arguments valid against each tool's
// `parameters`), and the parser that turns a reply back into content and calls.
//
// The layouts (the opening tag written as the template writes it):
//   Hermes   Qwen2.5, Qwen3, Hermes 2/3:  <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   Llama3   Llama 3.1–3.3 JSON calls:    {"name": "f", "parameters": {...}}, possibly after <|python_tag|>
//   Mistral  Mistral v0.3, Nemo, Small:   [TOOL_CALLS][{"name": "f", "arguments": {...}, "id": "a1b2c3d4e"}]
//   Generic  any other template:          {"tool_calls": [{"name": "f", "arguments": {...}}]} as the
//            whole reply, which the model is told about in a system message (generic_tool_prompt).

#include <string>
#include <string_view>
#include <vector>

namespace pagoda::chat {

enum class ToolCallFormat { Hermes, Llama3, Mistral, Generic };

const char* tool_call_format_name(ToolCallFormat f);

// The layout a Jinja chat template writes tool calls in, recognised by its distinctive text;
// Generic when it shows none.
ToolCallFormat detect_tool_call_format(std::string_view chat_template);

struct ToolDefinition {
  std::string name;
  std::string parameters;  // a JSON Schema (text) of the arguments object (any object when not given)
};

// OpenAI's `tools` array ([{"type": "function", "function": {"name", "parameters", ...}}]) →
// definitions. Throws pagoda::Error naming the entry for a malformed one or a repeated name,
// and for JSON nested deeper than kMaxJsonDepth (engine/util/json_depth.h).
std::vector<ToolDefinition> parse_tool_definitions(std::string_view tools_json);

// A grammar admitting one call (or, with `parallel`, one or more) of any of `tools` in
// `format`, each call's arguments valid against its tool's parameters. With `lazy`, the
// grammar is meant to start at a trigger in a free reply (Request::grammar_triggers =
// `triggers`); otherwise it constrains the whole reply. `control_tag`: the format's opening tag
// is one control token of the vocabulary, which a grammar cannot produce: a whole-reply grammar
// then leaves it out (the parser reads calls with or without it), and a lazy one is triggered
// by the token's own spelling.
struct ToolGrammar {
  std::string gbnf;
  std::vector<std::string> triggers;  // empty unless lazy
};
ToolGrammar tool_call_grammar(ToolCallFormat format, const std::vector<ToolDefinition>& tools, bool lazy, bool parallel,
                              bool control_tag);

// A whole-reply grammar admitting either the calls tool_call_grammar admits (not lazy) or one
// value of `answer_schema` (a JSON Schema): tools offered with "auto" beside a response format,
// as OpenAI allows, so the reply is calls or the formatted answer. Throws pagoda::Error for a
// schema that does not compile.
ToolGrammar tool_or_answer_grammar(ToolCallFormat format, const std::vector<ToolDefinition>& tools,
                                   std::string_view answer_schema, bool parallel, bool control_tag);

// The format's opening tag ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>"; empty for Generic).
std::string_view tool_call_tag(ToolCallFormat format);

// The system-prompt text that tells a model with a Generic template about the tools and the
// reply layout.
std::string generic_tool_prompt(std::string_view tools_json);

struct ParsedToolCall {
  std::string id;  // as the model wrote it (Mistral), else empty
  std::string name;
  std::string arguments;  // the arguments object as compact JSON text
};

struct ParsedReply {
  std::string content;  // the text outside the calls, trimmed
  std::vector<ParsedToolCall> calls;
};

// Splits a reply (control tokens spelled out) into content and calls. Text that does not parse
// as a call of a known tool (or is nested deeper than kMaxJsonDepth) stays content, so a
// malformed call is never lost.
ParsedReply parse_tool_calls(ToolCallFormat format, std::string_view reply, const std::vector<ToolDefinition>& tools);

}  // namespace pagoda::chat
