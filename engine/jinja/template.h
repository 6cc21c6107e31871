#pragma once
// A Jinja2 chat template, rendered byte for byte as transformers' apply_chat_template renders
// it with Python's jinja2: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
// with loopcontrols, json.dumps-style tojson, raise_exception() and strftime_now().
//
// Parse once, render many times; a Template is immutable and may be rendered from several
// threads at once.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/jinja/budget.h"
#include "pagoda/chat.h"

namespace pagoda::jinja {

struct Stmt;

class Template {
 public:
  // Throws pagoda::Error "template line N: ..." when jinja2 would refuse the text.
  explicit Template(std::string_view source);

  // The template with `context`'s members as its variables (messages, tools, bos_token, ...).
  // Throws pagoda::Error "template line N: ..." when the template fails (raise_exception,
  // undefined attribute of an undefined value, a type error) or exceeds `limits`.
  std::string render(const nlohmann::ordered_json& context, const Limits& limits = {}) const;
  // The same text, with the byte ranges printed from the strings of the context members named
  // in `data_members` (messages, tools, ...): what the template copied from the chat's data.
  ChatPrompt render_with_spans(const nlohmann::ordered_json& context, const std::vector<std::string>& data_members,
                               const Limits& limits = {}) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
};

}  // namespace pagoda::jinja
