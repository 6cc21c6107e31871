#include "support/chat_models.h"

#include <cstdint>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "support/gguf_edit.h"
#include "engine/tokenizer/tokenizer.h"
#include "support/test_support.h"

namespace pagoda::test {

const char* const kChatmlJinja =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

std::string tiny_model_with_template(const std::string& name, const std::string& jinja, bool chatml_tokens) {
  return model_with_template(name, tiny_gqa_model(), jinja, chatml_tokens);
}

std::string model_with_template(const std::string& name, const std::string& base, const std::string& jinja,
                                bool chatml_tokens) {
  return edited_model(name, base, [&](GgufWriter& w) {
    w.set_string("tokenizer.chat_template", jinja);
    if (!chatml_tokens) return;
    const GgufFile in = GgufFile::open(base);
    std::vector<std::string> tokens = in.get_string_array("tokenizer.ggml.tokens");
    std::vector<int32_t> types = in.get_int32_array("tokenizer.ggml.token_type");
    const size_t n = tokens.size();
    tokens[n - 2] = "<|im_start|>", tokens[n - 1] = "<|im_end|>";
    types[n - 2] = types[n - 1] = int32_t(TokenType::Control);
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_i32_array("tokenizer.ggml.token_type", types);
  });
}

}  // namespace pagoda::test
