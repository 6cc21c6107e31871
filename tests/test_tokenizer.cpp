// Tokenizer: the golden prompts of stories260K through both vocabularies (llama2.c's
// tokenizer.bin and the GGUF one), synthetic vocabularies for merge order, byte fallback and
// the streaming UTF-8 decoder (the files themselves: test_tokenizer_files).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "pagoda/error.h"
#include "support/test_support.h"
#include "support/vocab_support.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

const std::string kFFFD = "\xEF\xBF\xBD";

// ---------------------------------------------------------------------------------------------
// The shared golden data.

const std::string kShared = PAGODA_SHARED_DIR;
const std::string kTokBin = kShared + "/models/stories260K/tok512.bin";
const std::string kGguf = kShared + "/models/stories260K/stories260K.gguf";
const std::string kGolden = kShared + "/golden/stories260K_greedy.jsonl";

using test::GoldenCase;
using test::id_of;
using test::kWords;
using test::make_vocab;

std::vector<GoldenCase> load_golden() { return test::load_golden(kGolden); }

#define SKIP_WITHOUT_SHARED()                                                                    \
  do {                                                                                           \
    if (!fs::exists(kTokBin) || !fs::exists(kGguf) || !fs::exists(kGolden)) {                    \
      GTEST_SKIP() << kShared << " is absent: no stories260K model/golden data to test against"; \
    }                                                                                            \
  } while (0)

std::vector<std::pair<std::string, Tokenizer>> golden_tokenizers() {
  std::vector<std::pair<std::string, Tokenizer>> out;
  out.emplace_back("tok512.bin", Tokenizer::from_llama2c(kTokBin, 512));
  out.emplace_back("stories260K.gguf", Tokenizer::from_gguf(GgufFile::open(kGguf)));
  return out;
}

TEST(TokenizerGolden, EncodesPromptsLikeTheReference) {
  SKIP_WITHOUT_SHARED();
  const auto cases = load_golden();
  ASSERT_FALSE(cases.empty());
  for (const auto& [name, tok] : golden_tokenizers()) {
    EXPECT_EQ(tok.vocab_size(), 512) << name;
    EXPECT_EQ(tok.bos_id(), 1) << name;
    EXPECT_EQ(tok.eos_id(), 2) << name;
    EXPECT_TRUE(tok.add_bos()) << name;
    for (const auto& c : cases)
      EXPECT_EQ(tok.encode(c.prompt, true), c.prompt_ids) << name << ": \"" << c.prompt << "\"";
  }
}

// The reference `text` is what llama2.c's run.c printed: the prompt pieces after BOS and the
// generated pieces, with the leading space of the piece right after BOS removed ("Once upon",
// not " Once upon"). That is the StreamDecoder's default rule (strip_leading_space follows
// add_space_prefix): one leading space is stripped from the first text at the start of the
// stream and after each BOS. (llama.cpp's llama_detokenize would let the BOS at the front use up
// its strip-the-first-token rule and print " Once upon"; the golden README says llama.cpp agrees
// "in text", i.e. up to that leading space.) Without stripping, the text gets exactly that one
// leading space back.
TEST(TokenizerGolden, StreamDecodeReproducesTheReferenceText) {
  SKIP_WITHOUT_SHARED();
  const auto cases = load_golden();
  for (const auto& [name, tok] : golden_tokenizers()) {
    for (const auto& c : cases) {
      std::vector<int32_t> ids = c.prompt_ids;
      ids.insert(ids.end(), c.greedy_ids.begin(), c.greedy_ids.end());
      StreamDecoder d(tok);
      std::string text;
      for (int32_t id : ids) text += d.feed(id);
      text += d.flush();
      EXPECT_EQ(text, c.text) << name << ": \"" << c.prompt << "\"";
      EXPECT_EQ(tok.decode(ids), c.text) << name;
      EXPECT_EQ(tok.decode(ids, false), " " + c.text) << name;
      // The prompt text is a prefix of the reference text (BOS, then the prompt's pieces).
      EXPECT_EQ(tok.decode(c.prompt_ids), c.prompt) << name;
    }
  }
}

TEST(TokenizerGolden, BothVocabulariesAgreeAndRoundTrip) {
  SKIP_WITHOUT_SHARED();
  auto toks = golden_tokenizers();
  const Tokenizer& bin = toks[0].second;
  const Tokenizer& gguf = toks[1].second;
  for (int32_t id = 0; id < 512; ++id) {
    EXPECT_EQ(bin.token_text(id), gguf.token_text(id)) << id;
    EXPECT_EQ(bin.vocab().scores[size_t(id)], gguf.vocab().scores[size_t(id)]) << id;
    EXPECT_EQ(bin.vocab().types[size_t(id)], gguf.vocab().types[size_t(id)]) << id;
  }
  EXPECT_EQ(bin.vocab().space_marker, SpaceMarker::Space);
  EXPECT_EQ(gguf.vocab().space_marker, SpaceMarker::Escaped);
  EXPECT_EQ(bin.token_text(13), "\n");
  EXPECT_EQ(bin.token_text(1), "");  // "\n<s>\n" in llama2.c's file, a control token
  EXPECT_EQ(bin.token_text(2), "");
  for (const auto& c : load_golden()) {
    for (const std::string& text :
         {c.prompt, c.text, " " + c.text, c.text + "  \n\n x", std::string("caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD!")}) {
      const auto ids = bin.encode(text, true);
      EXPECT_EQ(ids, gguf.encode(text, true));
      EXPECT_EQ(bin.decode(ids), text);
      EXPECT_EQ(gguf.decode(ids), text);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Synthetic vocabularies.

int32_t byte_id(unsigned char b) { return 3 + b; }

// The O(n^2) reference: llama2.c's loop (merge the best-scoring adjacent pair, leftmost on
// ties, until none merges) over text spans, as llama.cpp's SPM tokenizer defines the result.
std::vector<int32_t> naive_encode(const TokenizerVocab& v, std::string_view text, bool add_bos) {
  const std::string sp = v.space_marker == SpaceMarker::Escaped ? test::kEscapedSpace : " ";
  std::unordered_map<std::string, int32_t> ids;
  for (size_t i = 0; i < v.tokens.size(); ++i) ids[v.tokens[i]] = int32_t(i);
  std::vector<int32_t> out;
  if (add_bos) out.push_back(v.bos_id);
  if (text.empty()) return out;
  std::string s = v.add_space_prefix ? sp : "";
  for (char c : text) s += c == ' ' ? sp : std::string(1, c);
  std::vector<std::string> spans;
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    size_t len = b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    len = std::min(len, s.size() - i);
    spans.push_back(s.substr(i, len));
    i += len;
  }
  while (true) {
    bool found = false;
    float best = 0;
    size_t at = 0;
    for (size_t i = 0; i + 1 < spans.size(); ++i) {
      auto it = ids.find(spans[i] + spans[i + 1]);
      if (it == ids.end()) continue;
      const float score = v.scores[size_t(it->second)];
      if (!found || score > best) found = true, best = score, at = i;
    }
    if (!found) break;
    spans[at] += spans[at + 1];
    spans.erase(spans.begin() + std::ptrdiff_t(at) + 1);
  }
  for (const auto& span : spans) {
    auto it = ids.find(span);
    if (it != ids.end()) {
      out.push_back(it->second);
    } else {
      for (unsigned char c : span) {
        auto b = ids.find(test::byte_token_text(c));
        out.push_back(b != ids.end() ? b->second : v.unk_id);
      }
    }
  }
  return out;
}

TEST(Tokenizer, EncodesWithSpacePrefixAndMerges) {
  Tokenizer tok(make_vocab(kWords));
  const auto ids = tok.encode("hello world!", true);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, id_of(tok, " hello"), id_of(tok, " world"), id_of(tok, "!")}));
  EXPECT_EQ(ids, naive_encode(tok.vocab(), "hello world!", true));
  EXPECT_EQ(tok.decode(ids), "hello world!");
  EXPECT_EQ(tok.token_text(id_of(tok, " hello")), " hello");
  EXPECT_EQ(tok.token_text(1), "");
  EXPECT_EQ(tok.token_text(2), "");
  EXPECT_EQ(tok.token_text(0), "");
  EXPECT_EQ(tok.token_text(byte_id(0x41)), "A");
  EXPECT_THROW(tok.token_text(-1), Error);
  EXPECT_THROW(tok.token_text(tok.vocab_size()), Error);
  // Without the prefix the first word has no space piece to merge with.
  TokenizerVocab v = make_vocab(kWords);
  v.add_space_prefix = false;
  Tokenizer plain(v);
  EXPECT_EQ(plain.encode("hello", false), (std::vector<int32_t>{id_of(plain, "hello")}));
  EXPECT_EQ(plain.decode(plain.encode("hello world", true)), "hello world");
}

TEST(Tokenizer, BothSpaceSpellingsGiveTheSameIds) {
  Tokenizer escaped(make_vocab(kWords, true));
  Tokenizer plain(make_vocab(kWords, false));
  TokenizerVocab autov = make_vocab(kWords, true);
  autov.space_marker = SpaceMarker::Auto;
  Tokenizer detected(autov);
  EXPECT_EQ(detected.vocab().space_marker, SpaceMarker::Escaped);
  TokenizerVocab autop = make_vocab(kWords, false);
  autop.space_marker = SpaceMarker::Auto;
  EXPECT_EQ(Tokenizer(autop).vocab().space_marker, SpaceMarker::Space);
  for (std::string text : {"hello world", " hello  world ", "hh ee ll oo", "world hello!! wor ld"}) {
    EXPECT_EQ(escaped.encode(text, true), plain.encode(text, true)) << text;
    EXPECT_EQ(escaped.encode(text, true), detected.encode(text, true)) << text;
    EXPECT_EQ(escaped.decode(escaped.encode(text, true)), text);
    EXPECT_EQ(plain.decode(plain.encode(text, true)), text);
  }
}

TEST(Tokenizer, EmptyTextIsBosOnly) {
  Tokenizer tok(make_vocab(kWords));
  EXPECT_EQ(tok.encode("", true), (std::vector<int32_t>{1}));
  EXPECT_TRUE(tok.encode("", false).empty());
  EXPECT_EQ(tok.encode(" ", false), (std::vector<int32_t>{id_of(tok, " "), id_of(tok, " ")}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1}), "");
}

TEST(Tokenizer, MergePriorityAndTies) {
  // "abc": the better of ab / bc wins; on a tie the leftmost.
  auto encode_abc = [](float ab, float bc) {
    TokenizerVocab v = make_vocab({{"a", -1}, {"b", -1}, {"c", -1}, {"ab", ab}, {"bc", bc}});
    v.add_space_prefix = false;
    Tokenizer tok(v);
    auto ids = tok.encode("abc", false);
    EXPECT_EQ(ids, naive_encode(tok.vocab(), "abc", false));
    std::string joined;
    for (int32_t id : ids) joined += tok.vocab().tokens[size_t(id)] + "|";
    return joined;
  };
  EXPECT_EQ(encode_abc(-5, -6), "ab|c|");
  EXPECT_EQ(encode_abc(-6, -5), "a|bc|");
  EXPECT_EQ(encode_abc(-5, -5), "ab|c|");

  // Ties over a run: "aaaaa" with "aa" merges left to right: aa aa a; with "aaaa" better than
  // "aa" nothing changes the first step, then aa+aa → aaaa.
  TokenizerVocab v = make_vocab({{"a", -1}, {"aa", -2}});
  v.add_space_prefix = false;
  Tokenizer tok(v);
  const int32_t a = id_of(tok, "a"), aa = id_of(tok, "aa");
  EXPECT_EQ(tok.encode("aaaaa", false), (std::vector<int32_t>{aa, aa, a}));
  TokenizerVocab v4 = make_vocab({{"a", -1}, {"aa", -2}, {"aaaa", -3}});
  v4.add_space_prefix = false;
  Tokenizer tok4(v4);
  EXPECT_EQ(tok4.encode("aaaaa", false), (std::vector<int32_t>{id_of(tok4, "aaaa"), id_of(tok4, "a")}));

  // Score beats position: "xyz" where "yz" (later) outranks "xy", and "xyz" is only reachable
  // from "x"+"yz".
  TokenizerVocab v3 = make_vocab({{"x", -1}, {"y", -1}, {"z", -1}, {"xy", -9}, {"yz", -2}, {"xyz", -8}});
  v3.add_space_prefix = false;
  Tokenizer tok3(v3);
  EXPECT_EQ(tok3.encode("xyz", false), (std::vector<int32_t>{id_of(tok3, "xyz")}));
  // A piece that is not reachable by pairwise merges is never produced.
  TokenizerVocab vn = make_vocab({{"x", -1}, {"y", -1}, {"z", -1}, {"xyz", 0}});
  vn.add_space_prefix = false;
  Tokenizer tokn(vn);
  EXPECT_EQ(tokn.encode("xyz", false), (std::vector<int32_t>{id_of(tokn, "x"), id_of(tokn, "y"), id_of(tokn, "z")}));
}

// The priority queue gives exactly the greedy best-pair result, on random vocabularies (with
// many tied scores) and random texts, including multi-byte and unknown characters.
TEST(Tokenizer, MatchesTheNaiveGreedyEncoderOnRandomInput) {
  std::mt19937_64 rng(12345);
  const std::vector<std::string> alphabet = {"a", "b", "c", "d", " ", "\xC3\xA9", "\xE4\xBD\xA0", "\xF0\x9F\x98\x80",
                                             "z"};
  for (int round = 0; round < 60; ++round) {
    std::vector<std::pair<std::string, float>> pieces;
    std::vector<std::string> known;
    for (size_t i = 0; i + 1 < alphabet.size(); ++i) {         // "z" stays outside the vocabulary
      if (rng() % 5 == 0 && alphabet[i].size() > 1) continue;  // some multi-byte chars unknown
      known.push_back(alphabet[i]);
      pieces.push_back({alphabet[i], -float(rng() % 4)});
    }
    const int extra = 10 + int(rng() % 40);
    for (int i = 0; i < extra && !known.empty(); ++i) {
      std::string p = known[rng() % known.size()] + known[rng() % known.size()];
      if (std::find(known.begin(), known.end(), p) != known.end()) continue;
      known.push_back(p);
      pieces.push_back({p, -float(rng() % 6)});  // few distinct scores: many ties
    }
    TokenizerVocab v = make_vocab(pieces, round % 2 == 0, round % 3 != 0);
    v.add_space_prefix = round % 4 != 1;
    Tokenizer tok(v);
    for (int t = 0; t < 20; ++t) {
      std::string text;
      const int len = int(rng() % 40);
      for (int k = 0; k < len; ++k) text += alphabet[rng() % alphabet.size()];
      const auto ids = tok.encode(text, true);
      ASSERT_EQ(ids, naive_encode(tok.vocab(), text, true)) << "round " << round << " text \"" << text << "\"";
      if (round % 3 != 0) {
        EXPECT_EQ(tok.decode(ids, v.add_space_prefix), text);
      }
    }
  }
}

TEST(Tokenizer, ByteFallbackRoundTrips) {
  Tokenizer tok(make_vocab(kWords));
  const std::string emoji = "\xF0\x9F\x98\x80";        // U+1F600
  const std::string cjk = "\xE4\xBD\xA0\xE5\xA5\xBD";  // 你好
  auto ids = tok.encode(emoji, false);
  EXPECT_EQ(ids, (std::vector<int32_t>{id_of(tok, " "), byte_id(0xF0), byte_id(0x9F), byte_id(0x98), byte_id(0x80)}));
  EXPECT_EQ(tok.decode(ids), emoji);
  ids = tok.encode(cjk, true);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, id_of(tok, " "), byte_id(0xE4), byte_id(0xBD), byte_id(0xA0), byte_id(0xE5),
                                       byte_id(0xA5), byte_id(0xBD)}));
  EXPECT_EQ(tok.decode(ids), cjk);
  const std::string mixed = "hello " + cjk + " world" + emoji + "\t\n";
  ids = tok.encode(mixed, true);
  EXPECT_EQ(ids, naive_encode(tok.vocab(), mixed, true));
  EXPECT_EQ(tok.decode(ids), mixed);
  // Invalid UTF-8 in the input survives as bytes too.
  const std::string bad = "a\xFF\xC3(\xE4\xBD";
  ids = tok.encode(bad, false);
  EXPECT_EQ(tok.decode(ids, false), " " + std::string("a") + kFFFD + kFFFD + "(" + kFFFD);
}

TEST(Tokenizer, ByteFallbackWithoutByteTokensGivesUnk) {
  TokenizerVocab v = make_vocab({{" ", -1}, {"a", -1}}, true, /*bytes=*/false);
  Tokenizer tok(v);
  EXPECT_EQ(tok.encode("a\xC3\xA9", false), (std::vector<int32_t>{3, 4, 0, 0}));
}

TEST(StreamDecoder, HoldsBackASplitCharacterUntilComplete) {
  Tokenizer tok(make_vocab(kWords));
  StreamDecoder d(tok);
  EXPECT_EQ(d.feed(1), "");
  EXPECT_EQ(d.feed(id_of(tok, " hello")), "hello");
  EXPECT_EQ(d.feed(byte_id(0xF0)), "");
  EXPECT_EQ(d.feed(byte_id(0x9F)), "");
  EXPECT_EQ(d.feed(2), "");  // a control token in between changes nothing
  EXPECT_EQ(d.feed(byte_id(0x98)), "");
  EXPECT_EQ(d.feed(byte_id(0x80)), "\xF0\x9F\x98\x80");
  EXPECT_EQ(d.feed(byte_id(0xC3)), "");
  EXPECT_EQ(d.feed(byte_id(0xA9)), "\xC3\xA9");
  EXPECT_EQ(d.flush(), "");

  // Normal pieces that cut a character in two (as byte-level vocabularies do).
  TokenizerVocab v = make_vocab({{"x\xE4\xBD", -1}, {"\xA0y", -1}, {"\xE4", -1}}, true);
  v.types.back() = TokenType::UserDefined;
  Tokenizer t2(v);
  StreamDecoder d2(t2, false);
  EXPECT_EQ(d2.feed(t2.vocab_size() - 3), "x");
  EXPECT_EQ(d2.feed(t2.vocab_size() - 2), "\xE4\xBD\xA0y");
  EXPECT_EQ(d2.feed(t2.vocab_size() - 1), "");
  EXPECT_EQ(d2.flush(), kFFFD);
  EXPECT_EQ(d2.flush(), "");
}

std::string stream(const Tokenizer& tok, const std::vector<int>& bytes, bool flush = true) {
  StreamDecoder d(tok, false);
  std::string out;
  for (int b : bytes) out += d.feed(byte_id(static_cast<unsigned char>(b)));
  if (flush) out += d.flush();
  return out;
}

TEST(StreamDecoder, InvalidBytesBecomeReplacementCharacters) {
  Tokenizer tok(make_vocab(kWords));
  EXPECT_EQ(stream(tok, {0xFF}), kFFFD);
  EXPECT_EQ(stream(tok, {0x80, 0x41}), kFFFD + "A");                                // stray continuation
  EXPECT_EQ(stream(tok, {0xC3, 0x41}), kFFFD + "A");                                // cut short
  EXPECT_EQ(stream(tok, {0xE2, 0x82, 0x41}), kFFFD + "A");                          // one per maximal subpart
  EXPECT_EQ(stream(tok, {0xC0, 0xAF}), kFFFD + kFFFD);                              // overlong
  EXPECT_EQ(stream(tok, {0xE0, 0x80, 0x80}), kFFFD + kFFFD + kFFFD);                // overlong
  EXPECT_EQ(stream(tok, {0xED, 0xA0, 0x80}), kFFFD + kFFFD + kFFFD);                // surrogate
  EXPECT_EQ(stream(tok, {0xF4, 0x90, 0x80, 0x80}), kFFFD + kFFFD + kFFFD + kFFFD);  // > U+10FFFF
  EXPECT_EQ(stream(tok, {0xF0, 0x9F, 0x98}), kFFFD);                                // incomplete at the end
  EXPECT_EQ(stream(tok, {0xF0, 0x9F, 0x98}, false), "");                            // ... held back
  EXPECT_EQ(stream(tok, {0xF0, 0x9F, 0x98, 0xF0, 0x9F, 0x98, 0x80}), kFFFD + "\xF0\x9F\x98\x80");
  EXPECT_EQ(stream(tok, {0xEF, 0xBF, 0xBD}), kFFFD);                     // U+FFFD itself is fine
  EXPECT_EQ(stream(tok, {0xF4, 0x8F, 0xBF, 0xBF}), "\xF4\x8F\xBF\xBF");  // U+10FFFF
  // decode() follows the same rules.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{byte_id(0xC3), byte_id(0x41), byte_id(0xE4)}, false), kFFFD + "A" + kFFFD);
  StreamDecoder d(tok);
  EXPECT_THROW(d.feed(-1), Error);
  EXPECT_THROW(d.feed(tok.vocab_size()), Error);
}

TEST(StreamDecoder, LeadingSpaceRules) {
  Tokenizer tok(make_vocab(kWords));
  const int32_t hello = id_of(tok, " hello"), world = id_of(tok, " world"), sp = id_of(tok, " ");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, hello, world}), "hello world");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{hello, world}), "hello world");  // no BOS: stripped too
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, hello, world}, false), " hello world");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, 1, hello}), "hello");                 // control tokens skipped
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, hello, 2, 1, world}), "helloworld");  // again after each BOS
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, sp, sp, hello}), "  hello");          // only one space
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, byte_id(0x41), hello}), "A hello");
  TokenizerVocab v = make_vocab(kWords);
  v.add_space_prefix = false;
  Tokenizer noprefix(v);
  EXPECT_EQ(noprefix.decode(std::vector<int32_t>{1, hello, world}), " hello world");
  EXPECT_EQ(noprefix.decode(noprefix.encode(" hello world", true)), " hello world");
}

TEST(Tokenizer, ConstructorValidates) {
  auto ok = [] { return make_vocab(kWords); };
  EXPECT_NO_THROW((void)Tokenizer(ok()));
  EXPECT_THROW((void)Tokenizer(TokenizerVocab{}), Error);
  {
    auto v = ok();
    v.scores.pop_back();
    EXPECT_THROW((void)Tokenizer(std::move(v)), Error);
  }
  {
    auto v = ok();
    v.types.push_back(TokenType::Normal);
    EXPECT_THROW((void)Tokenizer(std::move(v)), Error);
  }
  for (int32_t TokenizerVocab::*field : {&TokenizerVocab::bos_id, &TokenizerVocab::eos_id, &TokenizerVocab::unk_id}) {
    auto v = ok();
    v.*field = int32_t(v.tokens.size());
    EXPECT_THROW((void)Tokenizer(std::move(v)), Error);
    v = ok();
    v.*field = -1;
    EXPECT_THROW((void)Tokenizer(std::move(v)), Error);
  }
  {
    auto v = ok();
    v.types[5] = TokenType(0);
    EXPECT_THROW((void)Tokenizer(std::move(v)), Error);
  }
  {
    auto v = ok();
    v.types.back() = TokenType::Byte;  // " h" is not <0xXX>
    EXPECT_THROW((void)Tokenizer(std::move(v)), Error);
  }
  {
    auto v = ok();
    v.scores[7] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_THROW((void)Tokenizer(std::move(v)), Error);
  }
}

// 100k characters encode in O(n log n) (llama2.c's rescans would take minutes here).
TEST(Tokenizer, LongInput) {
  Tokenizer tok(make_vocab(kWords));
  std::mt19937_64 rng(7);
  const std::vector<std::string> words = {"hello", "world", "hell", "low", "row", "\xE4\xBD\xA0", "!", "old", "\n"};
  std::string text;
  while (text.size() < 100000) text += words[rng() % words.size()] + (rng() % 3 ? " " : "");
  const auto ids = tok.encode(text, true);
  EXPECT_GT(ids.size(), 10000u);
  EXPECT_EQ(tok.decode(ids), text);
  // One long run of a single merging character: the worst case for stale queue entries.
  const std::string run(100000, 'l');
  const auto run_ids = tok.encode(run, false);
  EXPECT_EQ(run_ids.size(), 50001u);  // " " then 50000 × "ll"
  EXPECT_EQ(tok.decode(run_ids), run);
  // The naive encoder agrees on a prefix short enough for it.
  const std::string head = text.substr(0, 1500);
  EXPECT_EQ(tok.encode(head, true), naive_encode(tok.vocab(), head, true));
}

}  // namespace
}  // namespace pagoda
