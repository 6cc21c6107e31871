#include "engine/jinja/template.h"

#include <algorithm>

#include "engine/jinja/globals.h"
#include "engine/jinja/parser.h"
#include "engine/jinja/renderer.h"
#include "pagoda/error.h"

namespace pagoda::jinja {

Template::Template(std::string_view source) : body_(std::make_shared<const Body>(parse(source))) {}

std::string Template::render(const nlohmann::ordered_json& context, const Limits& limits) const {
  return render_with_spans(context, {}, limits).text;
}

ChatPrompt Template::render_with_spans(const nlohmann::ordered_json& context,
                                       const std::vector<std::string>& data_members, const Limits& limits) const {
  if (!context.is_object()) throw Error("a chat template's context must be a JSON object");
  Dict globals;
  add_globals(globals);
  for (const auto& [name, value] : context.items()) {
    const bool data = std::find(data_members.begin(), data_members.end(), name) != data_members.end();
    globals.set(Value(name), from_json(value, data));
  }
  Renderer renderer(limits, globals);
  Value out = renderer.render(*body_);
  ChatPrompt prompt;
  if (out.spans) prompt.data_spans = *out.spans;
  prompt.text = std::move(std::get<std::string>(out.v));
  return prompt;
}

}  // namespace pagoda::jinja
