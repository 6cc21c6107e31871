#include "engine/chat/jinja/template.h"

#include "engine/chat/jinja/globals.h"
#include "engine/chat/jinja/parser.h"
#include "engine/chat/jinja/renderer.h"
#include "pagoda/error.h"

namespace pagoda::jinja {

Template::Template(std::string_view source) : body_(std::make_shared<const Body>(parse(source))) {}

std::string Template::render(const nlohmann::ordered_json& context, const Limits& limits) const {
  if (!context.is_object()) throw Error("a chat template's context must be a JSON object");
  Dict globals;
  add_globals(globals);
  for (const auto& [name, value] : context.items()) globals.set(Value(name), from_json(value));
  Renderer renderer(limits, globals);
  return renderer.render(*body_);
}

}  // namespace pagoda::jinja
