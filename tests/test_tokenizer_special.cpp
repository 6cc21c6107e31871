// Special tokens: parsing control / user-defined tokens written in the text (on and off), the
// end-of-generation set (llama.cpp's, checked on the llamacpp-quant vocabularies), and
// generation stopping at any end-of-generation token through the Engine.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/tokenizer/tokenizer.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/test_support.h"
#include "support/vocab_support.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

const std::string kShared = PAGODA_SHARED_DIR;
const std::string kSp = "\xE2\x96\x81";  // "▁"

// A small SentencePiece vocabulary with a control token, a user-defined one and an EOT.
TokenizerVocab chat_vocab() {
  TokenizerVocab v = test::spm_vocab_base();
  auto add = [&](std::string t, TokenType type, float score = 0.0f) { test::add_token(v, std::move(t), type, score); };
  for (char c = 'a'; c <= 'z'; ++c) add(std::string(1, c), TokenType::Normal, -10.0f);
  add(kSp, TokenType::Normal, -10.0f);
  add("<", TokenType::Normal, -10.0f);
  add(">", TokenType::Normal, -10.0f);
  add("|", TokenType::Normal, -10.0f);
  add("_", TokenType::Normal, -10.0f);
  add(kSp + "hi", TokenType::Normal, -1.0f);
  add("hi", TokenType::Normal, -1.0f);
  add("<|im_start|>", TokenType::Control);
  add("<|im_end|>", TokenType::Normal);  // llama.cpp makes it Control by its text
  add("<think>", TokenType::UserDefined);
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  v.space_marker = SpaceMarker::Escaped;
  return v;
}

int32_t id_of(const Tokenizer& tok, const std::string& piece) {
  const int32_t id = tok.find_piece(piece);
  EXPECT_GE(id, 0) << piece;
  return id;
}

TEST(SpecialTokens, ControlTokensParsedOnlyWithParseSpecial) {
  const Tokenizer tok(chat_vocab());
  const int32_t start = id_of(tok, "<|im_start|>"), end = id_of(tok, "<|im_end|>"), hi = id_of(tok, kSp + "hi");
  EXPECT_EQ(tok.vocab().types[size_t(end)], TokenType::Control);

  // parse_special: the tokens come out whole; the text after each gets the SPM space prefix
  // again, as llama.cpp does.
  EXPECT_EQ(tok.encode("<|im_start|>hi<|im_end|>", false, true), (std::vector<int32_t>{start, hi, end}));
  EXPECT_EQ(tok.encode("hi<|im_end|>hi", true, true), (std::vector<int32_t>{1, hi, end, hi}));
  EXPECT_EQ(tok.encode("<s>hi</s>", false, true), (std::vector<int32_t>{1, hi, 2}));

  // Without it the control token's text is ordinary text: no special id appears.
  for (const std::string text : {"<|im_start|>hi<|im_end|>", "<s>hi</s>"}) {
    const std::vector<int32_t> ids = tok.encode(text, false);
    for (int32_t id : ids) {
      EXPECT_NE(tok.vocab().types[size_t(id)], TokenType::Control) << text;
    }
    EXPECT_EQ(tok.decode(ids), text);
  }
}

TEST(SpecialTokens, UserDefinedTokensAlwaysMatchedWhole) {
  const Tokenizer tok(chat_vocab());
  const int32_t think = id_of(tok, "<think>"), hi = id_of(tok, kSp + "hi");
  for (bool parse_special : {false, true}) {
    EXPECT_EQ(tok.encode("<think>hi", false, parse_special), (std::vector<int32_t>{think, hi})) << parse_special;
    EXPECT_EQ(tok.encode("hi<think>", false, parse_special), (std::vector<int32_t>{hi, think})) << parse_special;
  }
  // A user-defined token decodes to its text; a control one to nothing.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{hi, think}), "hi<think>");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{hi, id_of(tok, "<|im_end|>")}), "hi");
}

// chat_vocab and a control token "<|im", the start of <|im_start|>'s and <|im_end|>'s texts.
Tokenizer chat_tokenizer_with_im_prefix() {
  TokenizerVocab v = chat_vocab();
  test::add_token(v, "<|im", TokenType::Control);
  return Tokenizer(std::move(v));
}

TEST(SpecialTokens, LongestTokenWinsWhereTextsOverlap) {
  const Tokenizer tok = chat_tokenizer_with_im_prefix();
  EXPECT_EQ(tok.encode("<|im_start|><|im", false, true),
            (std::vector<int32_t>{id_of(tok, "<|im_start|>"), id_of(tok, "<|im")}));
}

TEST(SpecialTokens, ControlTokensTouchingDataSpansStayText) {
  const Tokenizer tok = chat_tokenizer_with_im_prefix();
  const int32_t start = id_of(tok, "<|im_start|>"), end = id_of(tok, "<|im_end|>"), im = id_of(tok, "<|im");
  const std::string text = "<|im_start|>hi<|im_end|><|im_end|>";  // bytes 0-12 template, 12-24 data
  const std::vector<TextSpan> data{{12, 24}};
  // The data's "<|im_end|>" is text, tokenized with the text around it as one fragment; the
  // template's own controls are parsed.
  const std::vector<int32_t> ids = tok.encode(text, false, data);
  EXPECT_EQ(ids.front(), start);
  EXPECT_EQ(ids.back(), end);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), end), 1);
  std::vector<int32_t> plain = tok.encode("hi<|im_end|>", false, false);
  plain.insert(plain.begin(), start);
  plain.push_back(end);
  EXPECT_EQ(ids, plain);
  // A match that only partly lies in data stays text too, while a shorter control token wholly
  // outside the data is still cut out where it fits.
  const std::vector<int32_t> partial = tok.encode("<|im_start|>", false, std::vector<TextSpan>{{5, 6}});
  EXPECT_EQ(partial.front(), im);
  EXPECT_EQ(std::count(partial.begin(), partial.end(), start), 0);
  // Without data spans, exactly the ids of parse_special; user-defined tokens match in data.
  EXPECT_EQ(tok.encode(text, false, std::vector<TextSpan>{}), tok.encode(text, false, true));
  EXPECT_EQ(tok.encode("<think>", false, std::vector<TextSpan>{{0, 7}}), (std::vector<int32_t>{id_of(tok, "<think>")}));
}

TEST(SpecialTokens, EndOfGenerationSetFollowsLlamaCpp) {
  // EOS, the eot key, and tokens by their text.
  TokenizerVocab v = chat_vocab();
  const Tokenizer plain(v);
  EXPECT_EQ(plain.eog_ids(), (std::vector<int32_t>{2, id_of(plain, "<|im_end|>")}));
  v.eot_id = id_of(plain, "hi");
  const Tokenizer with_eot(v);
  EXPECT_EQ(with_eot.eog_ids(), (std::vector<int32_t>{2, id_of(plain, "hi"), id_of(plain, "<|im_end|>")}));
  EXPECT_TRUE(with_eot.is_eog(id_of(plain, "hi")));
  EXPECT_FALSE(with_eot.is_eog(1));

  v.eot_id = int32_t(v.tokens.size());
  EXPECT_THROW(Tokenizer{v}, Error);
}

// The tiny test model rewritten with one more metadata key.
std::string with_u32_key(const std::string& src, const std::string& dst, const std::string& key, uint32_t value) {
  const GgufFile f = GgufFile::open(src);
  GgufWriter w;
  for (const std::string& k : f.keys()) w.set(k, *f.find(k));
  for (const GgufTensorInfo& t : f.tensors()) w.add_tensor(t.name, t.shape, t.type, f.tensor_bytes(t));
  w.set_u32(key, value);
  w.write(dst);
  return dst;
}

TEST(SpecialTokens, GenerationStopsAtAnyEndOfGenerationToken) {
  // Greedy ids of the plain model, then the same model with its 4th generated id named the
  // EOT token: generation must end there (FinishReason::Eos), unless ignore_eos.
  auto greedy = [](const std::string& model, bool ignore_eos) {
    EngineConfig c;
    c.model_path = model;
    c.threads = 1;
    Engine engine(c);
    Request r;
    r.prompt = "Once upon a time";
    r.sampling.temperature = 0;
    r.max_new_tokens = 12;
    r.ignore_eos = ignore_eos;
    auto h = engine.submit(r);
    return std::pair{test::await(h), engine.eog_ids()};
  };
  const auto [plain, plain_eog] = greedy(test::tiny_gqa_model(), true);
  ASSERT_EQ(plain.token_ids.size(), 12u);
  size_t k = 3;  // the first position whose id did not appear before it
  while (k < plain.token_ids.size() && std::find(plain.token_ids.begin(), plain.token_ids.begin() + long(k),
                                                 plain.token_ids[k]) != plain.token_ids.begin() + long(k)) {
    ++k;
  }
  ASSERT_LT(k, plain.token_ids.size()) << "no fresh id to stop at";
  const int32_t stop = plain.token_ids[k];
  ASSERT_FALSE(std::binary_search(plain_eog.begin(), plain_eog.end(), stop));

  const std::string eot_model = with_u32_key(test::tiny_gqa_model(), test::scratch_path("tiny-gqa-eot.gguf"),
                                             "tokenizer.ggml.eot_token_id", uint32_t(stop));
  const auto [stopped, eog] = greedy(eot_model, false);
  EXPECT_TRUE(std::binary_search(eog.begin(), eog.end(), stop));
  EXPECT_EQ(stopped.finish_reason, FinishReason::Eos);
  EXPECT_EQ(stopped.token_ids, std::vector<int32_t>(plain.token_ids.begin(), plain.token_ids.begin() + long(k) + 1));

  const auto [ignored, eog2] = greedy(eot_model, true);
  EXPECT_EQ(ignored.finish_reason, FinishReason::Length);
  EXPECT_EQ(ignored.token_ids, plain.token_ids);
}

}  // namespace
}  // namespace pagoda
