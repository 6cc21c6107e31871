// Chat templates on arbitrary bytes: the input is split at NUL bytes into a Jinja template, an
// EOS spelling and then role/content pairs. Detection must not fault on any template;
// applying a detected template must lay out any messages (or refuse an unknown role with
// pagoda::Error), and the result must contain every message's content.

#include <vector>

#include "engine/chat/chat_template.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      parts.emplace_back();
    } else {
      parts.back().push_back(char(data[i]));
    }
  }
  const std::string eos = parts.size() > 1 ? parts[1] : "</s>";
  const std::optional<pagoda::chat::Template> t = pagoda::chat::detect_template(parts[0], eos);
  if (!t) return 0;
  std::vector<pagoda::ChatMessage> messages;
  for (size_t i = 2; i + 1 < parts.size(); i += 2) messages.push_back({parts[i], parts[i + 1]});
  for (bool generation_prompt : {false, true}) {
    pagoda::fuzz::expect_clean([&] {
      const std::string prompt = pagoda::chat::apply_template(*t, messages, generation_prompt);
      (void)prompt;
    });
  }
  return 0;
}
