#include "support/chat_models.h"

#include <cstdint>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/tokenizer/tokenizer.h"
#include "support/test_support.h"

namespace pagoda::test {

const char* const kChatmlJinja =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

std::string tiny_model_with_template(const std::string& name, const std::string& jinja, bool chatml_tokens) {
  const GgufFile in = GgufFile::open(tiny_gqa_model());
  GgufWriter w;
  for (const std::string& key : in.keys()) w.set(key, *in.find(key));
  w.set_string("tokenizer.chat_template", jinja);
  if (chatml_tokens) {
    std::vector<std::string> tokens = in.get_string_array("tokenizer.ggml.tokens");
    std::vector<int32_t> types = in.get_int32_array("tokenizer.ggml.token_type");
    const size_t n = tokens.size();
    tokens[n - 2] = "<|im_start|>", tokens[n - 1] = "<|im_end|>";
    types[n - 2] = types[n - 1] = int32_t(TokenType::Control);
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_i32_array("tokenizer.ggml.token_type", types);
  }
  for (const GgufTensorInfo& t : in.tensors()) w.add_tensor(t.name, t.shape, t.type, in.tensor_bytes(t));
  const std::string path = scratch_path(name);
  w.write(path);
  return path;
}

}  // namespace pagoda::test
