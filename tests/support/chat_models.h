#pragma once
// Tiny test models that carry a chat template, for the chat CLI, the Engine's chat API and the
// server's tests.

#include <string>

namespace pagoda::test {

// A ChatML template as OpenHermes-2.5 writes it.
extern const char* const kChatmlJinja;

// The tiny test model with `jinja` as its chat template, written to the scratch folder as
// `name`; with `chatml_tokens` its last two tokens become ChatML's special tokens
// (<|im_start|>, <|im_end|>), so a ChatML prompt can be tokenized as it should be.
std::string tiny_model_with_template(const std::string& name, const std::string& jinja, bool chatml_tokens);
// The same edit of another model, `base` (a vision test's language model).
std::string model_with_template(const std::string& name, const std::string& base, const std::string& jinja,
                                bool chatml_tokens);

}  // namespace pagoda::test
