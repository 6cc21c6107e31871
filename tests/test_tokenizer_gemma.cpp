// Gemma's SentencePiece vocabulary through the SPM tokenizer, against llama.cpp's ids.
//
// No Gemma tokenizer is on hand (it is gated), so the test builds a Gemma-flavoured vocabulary
// from ../shared/vocab/ggml-vocab-llama-spm.gguf as llama.cpp's convert_hf_to_gguf.py writes
// Gemma's: tokenizer.ggml.model "llama" with add_space_prefix false; <pad> <eos> <bos> <unk> at
// ids 0-3 (the llama pieces after them, one id later, same scores and types); control tokens
// (<start_of_turn>, <end_of_turn>, <mask>, <unusedN>, Gemma 3's image tokens) and user-defined
// ones (runs of newlines, spaces and tabs, HTML tags; spaces spelled " " and score -1000, as the
// converter pre-normalizes them), which llama.cpp matches in raw text even without special
// parsing. No EOT id is written (as for Gemma 2): <end_of_turn> is found by its text.
//
// tests/data/tokenizer_gemma.json holds the cases (llama-spm's .inp cases by index, and strings
// of our own) with llama.cpp's ids and detokenized text for every case under each of the four
// (add_special, parse_special) settings, its end-of-generation set, and Gemma chats as llama.cpp
// renders them. tests/data/tokenizer_gemma_oracle.cpp says how it was generated (llama.cpp
// c392e5094, 2025-02-20).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/chat/chat_renderer.h"
#include "engine/chat/chat_template.h"
#include "engine/jinja/template.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/tokenizer/tokenizer.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using json = nlohmann::json;

// The tokens appended after the llama pieces, in order, with their GGUF token types.
std::vector<std::pair<std::string, TokenType>> gemma_extra_tokens() {
  std::vector<std::pair<std::string, TokenType>> out;
  for (const char* t :
       {"<mask>", "[@BOS@]", "<unused0>", "<unused1>", "<unused2>", "<start_of_turn>", "<end_of_turn>"}) {
    out.push_back({t, TokenType::Control});
  }
  for (const char* run : {"\n", " ", "\t"}) {
    for (int n = run[0] == '\n' ? 1 : 2; n <= 31; ++n) {
      std::string s;
      for (int i = 0; i < n; ++i) s += run;
      out.push_back({s, TokenType::UserDefined});
    }
  }
  for (const char* tag : {"<table>", "</table>", "<tr>",    "</tr>",    "<td>",    "</td>", "<th>",  "</th>",
                          "<thead>", "</thead>", "<tbody>", "</tbody>", "<p>",     "</p>",  "<br>",  "<b>",
                          "</b>",    "<i>",      "</i>",    "<h1>",     "</h1>",   "<ul>",  "</ul>", "<li>",
                          "</li>",   "<div>",    "</div>",  "<code>",   "</code>", "<pre>", "</pre>"}) {
    out.push_back({tag, TokenType::UserDefined});
  }
  for (const char* t : {"<start_of_image>", "<end_of_image>", "<image_soft_token>"})
    out.push_back({t, TokenType::Control});
  return out;
}

// Writes the Gemma-flavoured vocabulary built from the llama-spm one at `llama_spm` to `path`;
// with a chat template when `chat_template` is not empty.
void write_gemma_vocab(const std::string& llama_spm, const std::string& path, const std::string& chat_template) {
  const GgufFile src = GgufFile::open(llama_spm);
  const std::vector<std::string> src_tokens = src.get_string_array("tokenizer.ggml.tokens");
  const std::vector<float> src_scores = src.get_float_array("tokenizer.ggml.scores");
  const std::vector<int32_t> src_types = src.get_int32_array("tokenizer.ggml.token_type");

  // Gemma's first four ids, then llama's pieces from its first byte token on.
  std::vector<std::string> tokens = {"<pad>", "<eos>", "<bos>", "<unk>"};
  std::vector<float> scores(4, -1000.0f);
  std::vector<int32_t> types = {int32_t(TokenType::Control), int32_t(TokenType::Control), int32_t(TokenType::Control),
                                int32_t(TokenType::Unknown)};
  for (size_t i = 3; i < src_tokens.size(); ++i) {
    tokens.push_back(src_tokens[i]);
    scores.push_back(src_scores[i]);
    types.push_back(src_types[i]);
  }
  for (const auto& [text, type] : gemma_extra_tokens()) {
    tokens.push_back(text);
    scores.push_back(-1000.0f);
    types.push_back(int32_t(type));
  }

  GgufWriter w;
  for (const std::string& key : src.keys()) {
    if (!key.starts_with("tokenizer.")) w.set(key, *src.find(key));
  }
  w.set_string("general.name", "gemma-flavoured llama-spm");
  w.set_u32("llama.vocab_size", uint32_t(tokens.size()));
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string("tokenizer.ggml.pre", "default");
  w.set_string_array("tokenizer.ggml.tokens", std::move(tokens));
  w.set_f32_array("tokenizer.ggml.scores", std::move(scores));
  w.set_i32_array("tokenizer.ggml.token_type", std::move(types));
  w.set_u32("tokenizer.ggml.bos_token_id", 2);
  w.set_u32("tokenizer.ggml.eos_token_id", 1);
  w.set_u32("tokenizer.ggml.unknown_token_id", 3);
  w.set_u32("tokenizer.ggml.padding_token_id", 0);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  if (!chat_template.empty()) w.set_string("tokenizer.chat_template", chat_template);
  w.write(path);
}

const char* const kLlamaSpm = "vocab/ggml-vocab-llama-spm.gguf";
const char* const kGemmaTemplate = "templates/google-gemma-2-2b-it.jinja";

// The vocabulary, written once per program. PAGODA_WRITE_GEMMA_VOCAB=<path> also writes it
// there (how the oracle gets the same file).
const std::string& gemma_vocab_path() {
  static const std::string path = [] {
    const std::string src = test::shared_file(kLlamaSpm);
    const std::string tmpl_file = test::shared_file(kGemmaTemplate);
    const std::string tmpl = tmpl_file.empty() ? "" : test::read_file(tmpl_file);
    const std::string p = test::scratch_path("gemma-flavoured.gguf");
    write_gemma_vocab(src, p, tmpl);
    if (const char* out = std::getenv("PAGODA_WRITE_GEMMA_VOCAB")) write_gemma_vocab(src, out, tmpl);
    return p;
  }();
  return path;
}

const Tokenizer& gemma() {
  static const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(gemma_vocab_path()));
  return tok;
}

const json& oracle() {
  static const json j =
      json::parse(test::read_file(std::string(PAGODA_SOURCE_DIR) + "/tests/data/tokenizer_gemma.json"));
  return j;
}

// A case's text: its own, or that llama-spm .inp case.
std::string case_text(const json& c) {
  if (c.contains("text")) return c["text"].get<std::string>();
  static const std::vector<std::string> inp = test::read_vocab_cases(test::shared_file(kLlamaSpm) + ".inp");
  return inp.at(c["inp"].get<size_t>());
}

#define GEMMA_OR_SKIP() PAGODA_SHARED_OR_SKIP(llama_spm_, kLlamaSpm)

std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += char(c);
    }
  }
  return out;
}

TEST(GemmaVocab, LoadsWithGemmasMetadata) {
  GEMMA_OR_SKIP();
  const Tokenizer& tok = gemma();
  EXPECT_EQ(tok.model(), TokenizerModel::Spm);
  EXPECT_FALSE(tok.add_space_prefix());
  EXPECT_TRUE(tok.add_bos());
  EXPECT_EQ(tok.bos_id(), 2);
  EXPECT_EQ(tok.eos_id(), 1);
  EXPECT_EQ(tok.unk_id(), 3);
  EXPECT_EQ(tok.vocab().tokens[4], "<0x00>");
  const int32_t start = tok.find_piece("<start_of_turn>"), end = tok.find_piece("<end_of_turn>");
  ASSERT_GE(start, 0);
  ASSERT_GE(end, 0);
  EXPECT_EQ(tok.vocab().types[size_t(end)], TokenType::Control);
  EXPECT_EQ(tok.vocab().types[size_t(tok.find_piece("\n\n"))], TokenType::UserDefined);
  // llama.cpp's end-of-generation set: <eos> and <end_of_turn>, found by its text.
  EXPECT_EQ(tok.eog_ids(), oracle()["eog"].get<std::vector<int32_t>>());
  EXPECT_TRUE(tok.is_eog(end));
  EXPECT_FALSE(tok.is_eog(start));
}

// Every case under every (add_special, parse_special) setting gives llama.cpp's ids.
TEST(GemmaVocab, EncodesLikeLlamaCpp) {
  GEMMA_OR_SKIP();
  const Tokenizer& tok = gemma();
  size_t compared = 0, matched = 0;
  for (const json& c : oracle()["cases"]) {
    const std::string text = case_text(c);
    for (const json& r : c["runs"]) {
      const bool bos = r["add_special"], special = r["parse_special"];
      const std::vector<int32_t> want = r["ids"].get<std::vector<int32_t>>();
      const std::vector<int32_t> got = tok.encode(text, bos, special);
      ++compared;
      matched += got == want;
      EXPECT_EQ(got, want) << "\"" << printable(text) << "\" add_special " << bos << " parse_special " << special;
    }
  }
  EXPECT_EQ(compared, oracle()["cases"].size() * 4);
  std::printf("Gemma-flavoured vocabulary: %zu of %zu tokenizations match llama.cpp\n", matched, compared);
}

// Decoding gives what llama_detokenize gives (control tokens dropped, user-defined ones
// verbatim, no space stripped), and so the text itself wherever no control token was parsed.
TEST(GemmaVocab, DecodesLikeLlamaCppAndRoundTrips) {
  GEMMA_OR_SKIP();
  const Tokenizer& tok = gemma();
  for (const json& c : oracle()["cases"]) {
    const std::string text = case_text(c);
    for (const json& r : c["runs"]) {
      const std::vector<int32_t> ids = r["ids"].get<std::vector<int32_t>>();
      const std::string want = r.contains("text") ? r["text"].get<std::string>() : text;
      EXPECT_EQ(tok.decode(ids), want) << "\"" << printable(text) << "\"";
      // (A "▁" written in the text comes back as a space, in llama.cpp too.)
      if (!r["parse_special"].get<bool>() && text.find("\xE2\x96\x81") == std::string::npos) {
        EXPECT_EQ(tok.decode(ids), text);
      }
    }
  }
  // A leading space survives: there is no dummy prefix to take off again.
  EXPECT_EQ(tok.decode(tok.encode(" Hello", true)), " Hello");
}

// The Gemma family layout (no Jinja) and the Gemma 2 Jinja template render what llama.cpp
// renders, and the turn markers become the control tokens.
TEST(GemmaVocab, ChatPromptsTokenizeToTheControlIds) {
  GEMMA_OR_SKIP();
  const Tokenizer& tok = gemma();
  const int32_t start = tok.find_piece("<start_of_turn>"), end = tok.find_piece("<end_of_turn>");
  const std::string tmpl_file = test::shared_file(kGemmaTemplate);
  for (const json& c : oracle()["chats"]) {
    std::vector<ChatMessage> messages;
    for (const json& m : c["messages"])
      messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    const std::string rendered = chat::apply_template({chat::Family::Gemma, "<end_of_turn>"}, messages, true);
    EXPECT_EQ(rendered, c["llama_cpp_prompt"].get<std::string>());
    const std::vector<int32_t> ids = tok.encode(rendered, true, true);
    EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>());
    size_t starts = 0, ends = 0;
    for (int32_t id : ids) starts += id == start, ends += id == end;
    EXPECT_EQ(starts, messages.size() + 1 - (messages.front().role == "system"));  // and the reply's header
    EXPECT_EQ(ends, messages.size() - (messages.front().role == "system"));
    EXPECT_EQ(tok.encode(rendered, true, false), c["ids_unparsed"].get<std::vector<int32_t>>());
    EXPECT_EQ(std::count(c["ids_unparsed"].begin(), c["ids_unparsed"].end(), start), 0);

    if (tmpl_file.empty() || messages.front().role == "system") continue;  // the template refuses a system turn
    const jinja::Template t(test::read_file(tmpl_file));
    ChatTemplateOptions options;
    const std::string jinja_prompt = chat::render_chat(t, messages, options, "<bos>", "<eos>");
    EXPECT_EQ(jinja_prompt, "<bos>" + rendered);  // the template writes bos_token itself
    // The template's BOS text parses as the BOS token (llama.cpp's server instead cuts the text
    // off and adds the BOS: the same ids).
    EXPECT_EQ(tok.encode(jinja_prompt, false, true), c["ids"].get<std::vector<int32_t>>());
  }
}

TEST(GemmaVocab, ByteFallbackAndUserDefinedRuns) {
  GEMMA_OR_SKIP();
  const Tokenizer& tok = gemma();
  // A character outside the vocabulary becomes its UTF-8 bytes' <0xXX> tokens (ids 4..259).
  const std::vector<int32_t> ids = tok.encode("\xF0\x9F\xA6\x99", false);
  EXPECT_EQ(ids, (std::vector<int32_t>{4 + 0xF0, 4 + 0x9F, 4 + 0xA6, 4 + 0x99}));
  // Runs longer than the longest whitespace token split longest first: 33 newlines are 31 + 2.
  const std::vector<int32_t> nl = tok.encode(std::string(33, '\n'), false);
  EXPECT_EQ(nl, (std::vector<int32_t>{tok.find_piece(std::string(31, '\n')), tok.find_piece("\n\n")}));
  // Text after a user-defined token gets no space prefix in a Gemma vocabulary.
  const std::vector<int32_t> after = tok.encode("a\n\nb", false);
  EXPECT_EQ(after, (std::vector<int32_t>{tok.find_piece("a"), tok.find_piece("\n\n"), tok.find_piece("b")}));
}

// llama.cpp's whitespace stripping by model name (not in the file): named phi-3, every special
// token but <unk>, <s> and <|endoftext|> eats the whitespace after it; named modern-bert,
// [MASK] eats the whitespace before it. Any other name keeps all whitespace. (Checked against
// llama.cpp on its phi-3 test vocabulary, which is not among ../shared's.)
TEST(GemmaVocab, WhitespaceStrippingByModelName) {
  GEMMA_OR_SKIP();
  auto with_name = [](const std::string& name, std::vector<std::string> extra = {}) {
    TokenizerVocab v = gemma().vocab();
    v.model_name = name;
    for (std::string& t : extra) {
      v.tokens.push_back(std::move(t));
      v.scores.push_back(-1000.0f);
      v.types.push_back(TokenType::Control);
    }
    return Tokenizer(std::move(v));
  };
  const std::string turn = "<start_of_turn> \n\tHi<end_of_turn>\n  <start_of_turn>";
  const Tokenizer phi3 = with_name("Phi-3 mini", {"<s>", "<|endoftext|>"});
  const int32_t start = phi3.find_piece("<start_of_turn>"), end = phi3.find_piece("<end_of_turn>");
  auto concat = [](std::initializer_list<std::vector<int32_t>> parts) {
    std::vector<int32_t> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  EXPECT_EQ(phi3.encode(turn, false, true), concat({{start}, phi3.encode("Hi", false), {end, start}}));
  EXPECT_EQ(phi3.encode(turn, false, true),
            with_name("PHI3").encode("<start_of_turn>Hi<end_of_turn><start_of_turn>", false, true));
  // User-defined tokens strip too, with or without special parsing; the exempt ones do not.
  EXPECT_EQ(phi3.encode("<p>  x", false), phi3.encode("<p>x", false));
  for (const char* keeps : {"<unk>", "<s>", "<|endoftext|>"}) {
    const std::string t = std::string(keeps) + " x";
    EXPECT_EQ(phi3.encode(t, false, true), concat({{phi3.find_piece(keeps)}, phi3.encode(" x", false)})) << t;
  }
  // Only what follows the token in its own fragment: whitespace before it stays.
  EXPECT_EQ(phi3.encode("x <end_of_turn>", false, true),
            (std::vector<int32_t>{phi3.find_piece("x"), phi3.find_piece("\xE2\x96\x81"), end}));

  // From a file: its general.name.
  {
    const GgufFile src = GgufFile::open(gemma_vocab_path());
    GgufWriter w;
    for (const std::string& key : src.keys()) w.set(key, *src.find(key));
    w.set_string("general.name", "Phi3");
    const std::string p = test::scratch_path("phi3-named.gguf");
    w.write(p);
    EXPECT_EQ(Tokenizer::from_gguf(GgufFile::open(p)).encode(turn, false, true), phi3.encode(turn, false, true));
  }

  const Tokenizer gemma2 = with_name("gemma-2-2b-it");
  EXPECT_EQ(gemma2.encode(turn, false, true), gemma().encode(turn, false, true));
  EXPECT_NE(gemma2.encode(turn, false, true), phi3.encode(turn, false, true));

  const Tokenizer bert = with_name("modern-bert-base", {"[MASK]"});
  const int32_t mask = bert.find_piece("[MASK]");
  EXPECT_EQ(bert.encode("a \t[MASK] b", false, true),
            concat({bert.encode("a", false), {mask}, bert.encode(" b", false)}));
  EXPECT_EQ(with_name("other", {"[MASK]"}).encode("a [MASK]", false, true).size(), 3u);  // "a", "▁", [MASK]
}

// Where llama.cpp takes a token back out of the end-of-generation set it also retypes it:
// gpt-oss's <|end|> (beside <|return|> and <|call|>) becomes user-defined, matched and printed
// as text; gemma4's </s> (beside <|tool_response>) becomes ordinary text.
TEST(GemmaVocab, TokensTakenOutOfTheEogSetAreRetyped) {
  GEMMA_OR_SKIP();
  auto with = [](std::vector<std::string> extra) {
    TokenizerVocab v = gemma().vocab();
    for (std::string& t : extra) {
      v.tokens.push_back(std::move(t));
      v.scores.push_back(-1000.0f);
      v.types.push_back(TokenType::Control);
    }
    return Tokenizer(std::move(v));
  };
  const Tokenizer oss = with({"<|return|>", "<|call|>", "<|end|>"});
  const int32_t end = oss.find_piece("<|end|>");
  EXPECT_EQ(oss.vocab().types[size_t(end)], TokenType::UserDefined);
  EXPECT_FALSE(oss.is_eog(end));
  EXPECT_EQ(oss.encode("a<|end|>", false, false).back(), end);
  EXPECT_EQ(oss.decode(oss.encode("a<|end|>", false, false)), "a<|end|>");
  const Tokenizer plain_end = with({"<|end|>"});
  EXPECT_EQ(plain_end.vocab().types[size_t(plain_end.find_piece("<|end|>"))], TokenType::Control);
  EXPECT_TRUE(plain_end.is_eog(plain_end.find_piece("<|end|>")));

  const Tokenizer g4 = with({"</s>", "<|tool_response>"});
  const int32_t s = g4.find_piece("</s>");
  EXPECT_EQ(g4.vocab().types[size_t(s)], TokenType::Normal);
  EXPECT_FALSE(g4.is_eog(s));
  EXPECT_EQ(g4.decode(std::vector<int32_t>{s}), "</s>");
  const Tokenizer plain_s = with({"</s>"});
  EXPECT_EQ(plain_s.vocab().types[size_t(plain_s.find_piece("</s>"))], TokenType::Control);
}

// Vocabulary types pagoda does not implement are refused, naming the type ("bert" is WordPiece,
// tests/test_tokenizer_wpm.cpp).
TEST(GemmaVocab, UnknownTokenizerModelsAreRefusedByName) {
  for (const char* model : {"rwkv", "t5", "ugm", "wpm", "plamo2", "none"}) {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", model);
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
    const std::string p = test::scratch_path(std::string("model-") + model + ".gguf");
    w.write(p);
    try {
      Tokenizer::from_gguf(GgufFile::open(p));
      ADD_FAILURE() << model << " was accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(p), std::string::npos) << what;
      EXPECT_NE(what.find("tokenizer.ggml.model"), std::string::npos) << what;
      EXPECT_NE(what.find(std::string("\"") + model + "\""), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace pagoda
