// Chat templates on arbitrary bytes: the input is split at NUL bytes into a template, an EOS
// spelling, a program for the tools JSON (deep and wide, see fuzz_structures.h), one for a tool
// call's arguments, and then role/content pairs. Detection must not fault on any template;
// applying a detected layout must lay out any messages (or refuse an unknown role with
// pagoda::Error) with every message's text among its data spans; rendering the template as
// Jinja with the tools and the call must give output with well-formed data spans or a
// pagoda::Error (JSON nested past the limit is one).

#include <vector>

#include "engine/chat/chat_renderer.h"
#include "engine/chat/chat_template.h"
#include "engine/jinja/template.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_structures.h"

namespace {

// Every span of a built-in layout is the text of messages, in order.
void check_layout_spans(const pagoda::ChatPrompt& p, const std::vector<pagoda::ChatMessage>& messages) {
  pagoda::fuzz::check_spans(p);
  std::string spans, contents;
  for (const pagoda::TextSpan& s : p.data_spans) spans += p.text.substr(s.begin, s.end - s.begin);
  for (const pagoda::ChatMessage& m : messages) contents += m.content;
  // Layouts may trim a message's whitespace, never add to it.
  if (spans.size() > contents.size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = pagoda::fuzz::split_at_nul(std::string_view(reinterpret_cast<const char*>(data), size));
  auto part = [&](size_t i) { return i < parts.size() ? std::string(parts[i]) : std::string(); };
  const std::string eos = parts.size() > 1 ? part(1) : "</s>";
  std::vector<pagoda::ChatMessage> messages;
  for (size_t i = 4; i + 1 < parts.size(); i += 2) messages.push_back({part(i), part(i + 1)});

  if (const std::optional<pagoda::chat::Template> t = pagoda::chat::detect_template(part(0), eos)) {
    for (bool generation_prompt : {false, true}) {
      pagoda::fuzz::expect_clean([&] {
        const pagoda::ChatPrompt prompt = pagoda::chat::apply_template_prompt(*t, messages, generation_prompt);
        if (prompt.text != pagoda::chat::apply_template(*t, messages, generation_prompt)) std::abort();
        check_layout_spans(prompt, messages);
      });
    }
  }

  if (parts.size() < 3) return 0;
  pagoda::ChatTemplateOptions options;
  options.tools = pagoda::fuzz::json_text(parts[2]);
  messages.push_back({"assistant", "", {{"call_1", "f", pagoda::fuzz::json_text(part(3))}}});
  pagoda::jinja::Limits limits;
  limits.max_steps = 200000;
  limits.max_output = 1 << 20;
  limits.max_call_depth = 16;
  pagoda::fuzz::expect_clean([&] {
    const pagoda::jinja::Template t(part(0));
    const nlohmann::ordered_json context = pagoda::chat::template_context(messages, options, "<s>", eos);
    pagoda::fuzz::check_spans(t.render_with_spans(context, {"messages", "tools"}, limits));
    pagoda::fuzz::check_spans(pagoda::chat::render_chat_prompt(t, messages, options, "<s>", eos));
  });
  return 0;
}
