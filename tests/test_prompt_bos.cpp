// Prompts start with BOS only when the model says so (GGUF tokenizer.ggml.add_bos_token):
// Qwen's vocabularies say false, and a prompt that starts with their BOS (<|endoftext|>, or
// llama.cpp's default id 11 when the file names none) reads as the end of a document.
// Checked through the programs that tokenize prompts themselves; pagoda-generate reads control
// tokens written in a prompt as text unless --special says otherwise.

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "testing/synth.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

std::string tiny_model_with_vocab(const std::string& vocab_path, Architecture arch, const std::string& name) {
  SynthSpec spec;
  spec.config.arch = arch;
  spec.config.dim = 32, spec.config.n_layers = 1, spec.config.n_heads = 2, spec.config.n_kv_heads = 1;
  spec.config.ffn_dim = 64, spec.config.context_length = 64;
  spec.vocab_path = vocab_path;
  const std::string path = test::scratch_path(name);
  write_synth_model(path, spec);
  return path;
}

// pagoda-generate's prompt ids for `prompt` on `model`.
std::vector<int32_t> generate_prompt_ids(const std::string& model, const std::string& prompt,
                                         const std::string& flags = "") {
  const test::ProgramRun r =
      test::run_program("pagoda-generate", "-m " + model + " --prompt '" + prompt + "' --temp 0 -n 2 -t 1 " + flags);
  EXPECT_EQ(r.status, 0) << r.output;
  const size_t at = r.output.find("\n{");  // the JSON line, after the load report
  const nlohmann::json line =
      nlohmann::json::parse(at == std::string::npos ? r.output : r.output.substr(at + 1), nullptr, false);
  if (line.is_discarded() || !line.contains("prompt_ids")) {
    ADD_FAILURE() << "no JSON line with prompt_ids: " << r.output;
    return {};
  }
  return line["prompt_ids"].get<std::vector<int32_t>>();
}

TEST(PromptBos, GenerateLeavesBosOutWhenTheVocabularySaysSo) {
  PAGODA_SHARED_OR_SKIP(vocab, "vocab/ggml-vocab-qwen2.gguf");
  const std::string model = tiny_model_with_vocab(vocab, Architecture::Qwen2, "qwen2-vocab.gguf");
  const Model m = load_model(model);
  ASSERT_FALSE(m.tokenizer.add_bos()) << "the qwen2 vocabulary should not ask for BOS";
  const std::string prompt = "Hello world";
  const std::vector<int32_t> ids = generate_prompt_ids(model, prompt);
  EXPECT_EQ(ids, m.tokenizer.encode(prompt, false));
  ASSERT_FALSE(ids.empty());
  EXPECT_NE(ids.front(), m.tokenizer.bos_id());
}

TEST(PromptBos, GeneratePutsBosFirstWhenTheVocabularyAsks) {
  PAGODA_SHARED_OR_SKIP(vocab, "vocab/ggml-vocab-llama-spm.gguf");
  const std::string model = tiny_model_with_vocab(vocab, Architecture::Llama, "spm-vocab.gguf");
  const Model m = load_model(model);
  ASSERT_TRUE(m.tokenizer.add_bos());
  const std::string prompt = "Hello world";
  const std::vector<int32_t> ids = generate_prompt_ids(model, prompt);
  EXPECT_EQ(ids, m.tokenizer.encode(prompt, true));
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), m.tokenizer.bos_id());
}

TEST(PromptBos, GenerateTurnsWrittenControlTokensIntoIdsOnlyWithSpecial) {
  PAGODA_SHARED_OR_SKIP(vocab, "vocab/ggml-vocab-qwen2.gguf");
  const std::string model = tiny_model_with_vocab(vocab, Architecture::Qwen2, "qwen2-vocab.gguf");
  const Model m = load_model(model);
  const std::string prompt = "<|im_start|>user";
  const int32_t im_start = m.tokenizer.find_piece("<|im_start|>");
  ASSERT_GE(im_start, 0);
  const std::vector<int32_t> special = generate_prompt_ids(model, prompt, "--special");
  EXPECT_EQ(special, m.tokenizer.encode(prompt, false, true));
  ASSERT_FALSE(special.empty());
  EXPECT_EQ(special.front(), im_start);
  const std::vector<int32_t> text = generate_prompt_ids(model, prompt);
  EXPECT_EQ(text, m.tokenizer.encode(prompt, false));
  EXPECT_EQ(std::count(text.begin(), text.end(), im_start), 0);
}

}  // namespace
}  // namespace pagoda
