#include "engine/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <initializer_list>

#include "engine/util/utf8.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

// llama.cpp's expressions (llama-vocab.cpp, llm_tokenizer_bpe), by the family it names them.
constexpr const char* kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr const char* kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kSeedCoder =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| "
    "?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kTekken =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+"
    "("
    "(?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kGpt4o =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL]"
    "["
    "lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]"
    "|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kPoro =
    " ?[^(\\s|.,!?\xE2\x80\xA6\xE3\x80\x82\xEF\xBC\x8C\xE3\x80\x81\xE0\xA5\xA4\xDB\x94\xD8\x8C)]+";
// DeepSeek LLM's: cased letters (Lu, Ll, Lt), ASCII / full-width punctuation, CJK and Hangul.
constexpr const char* kDeepseekLetters =
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{"
    "2AF}"
    "\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}"
    "\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"
    "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}"
    "\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}"
    "\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}"
    "\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
    "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}"
    "\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"
    "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}"
    "\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}"
    "\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}"
    "\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+";
constexpr const char* kDeepseekPunct =
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+";
constexpr const char* kCjk = "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";

struct Family {
  std::initializer_list<const char*> names;
  std::initializer_list<const char*> regexes;
  bool ignore_merges = false;
  bool add_bos = false;  // llama.cpp's default when the file does not say
};

// tokenizer.ggml.pre names → expressions, as llama.cpp maps them.
const std::initializer_list<Family> kFamilies = {
    {{"default", ""}, {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
     {kLlama3},
     true,
     true},
    {{"dbrx", "smaug-bpe"}, {kLlama3}},
    {{"deepseek-llm"}, {"[\r\n]", kDeepseekLetters, kDeepseekPunct, "\\s+$", kCjk, "\\p{N}+"}},
    {{"deepseek-coder"}, {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjk, "\\p{N}"}},
    {{"falcon"}, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"}},
    {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"}, {"\\p{N}", kGpt2}},
    {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
      "modern-bert", "exaone4", "mpt", "olmo", "jais", "trillion", "granite-docling"},
     {kGpt2}},
    {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2"},
     {kQwen2}},
    {{"seed-coder"}, {kSeedCoder}},
    {{"tekken"}, {kTekken}, true, true},
    {{"gpt-4o", "llama4", "kanana2", "talkie"}, {kGpt4o}},
    {{"poro-chat", "bloom", "gpt3-finnish"}, {kPoro}},
    {{"viking"}, {kPoro, "\\p{N}"}},
};

// Per-thread PCRE2 match state: the match data and a JIT stack big enough for long pieces.
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(32, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  MatchState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchState() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const std::string& name) : name_(name) {
  const Family* family = nullptr;
  for (const Family& f : kFamilies) {
    if (std::find_if(f.names.begin(), f.names.end(), [&](const char* n) { return name == n; }) != f.names.end()) {
      family = &f;
    }
  }
  if (!family) {
    std::string known;
    for (const std::string& n : known_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("tokenizer.ggml.pre is \"" + name + "\", a pre-tokenizer pagoda does not know (it knows " + known +
                ")");
  }
  ignore_merges_ = family->ignore_merges;
  for (const char* pattern : family->regexes) {
    auto r = std::make_unique<Regex>();
    int error = 0;
    PCRE2_SIZE offset = 0;
    r->code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                      PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
    if (!r->code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      throw Error("pre-tokenizer \"" + name + "\": expression " + pattern + " does not compile at offset " +
                  std::to_string(offset) + ": " + reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);  // without JIT (unsupported CPU) it is slower, not wrong
    regexes_.push_back(std::move(r));
  }
}

PreTokenizer::~PreTokenizer() = default;

std::vector<std::string> PreTokenizer::known_names() {
  std::vector<std::string> names;
  for (const Family& f : kFamilies) {
    for (const char* n : f.names) {
      if (*n) names.emplace_back(n);
    }
  }
  return names;
}

bool PreTokenizer::adds_bos_by_default(const std::string& name) {
  for (const Family& f : kFamilies) {
    if (std::find_if(f.names.begin(), f.names.end(), [&](const char* n) { return name == n; }) != f.names.end()) {
      return f.add_bos;
    }
  }
  return false;
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces) const {
  thread_local MatchState state;
  std::vector<std::string_view> current{text}, next;
  if (text.empty()) return;
  for (const auto& regex : regexes_) {
    next.clear();
    for (std::string_view piece : current) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t emitted = 0, from = 0;
      while (from < piece.size()) {
        const int rc =
            pcre2_match(regex->code, subject, piece.size(), from, PCRE2_NO_UTF_CHECK, state.data, state.context);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          PCRE2_UCHAR message[256];
          pcre2_get_error_message(rc, message, sizeof message);
          throw Error("pre-tokenizer \"" + name_ + "\": matching failed: " + reinterpret_cast<const char*>(message));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state.data);
        const size_t start = ov[0], end = ov[1];
        if (end == start) {  // an empty match splits nothing: step over one character
          from = start + 1;
          while (from < piece.size() && (static_cast<unsigned char>(piece[from]) & 0xC0) == 0x80) ++from;
          continue;
        }
        if (start > emitted) next.push_back(piece.substr(emitted, start - emitted));
        next.push_back(piece.substr(start, end - start));
        emitted = from = end;
      }
      if (emitted < piece.size()) next.push_back(piece.substr(emitted));
    }
    current.swap(next);
  }
  pieces.insert(pieces.end(), current.begin(), current.end());
}

std::string well_formed_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const size_t n = text.size();
  auto at = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  for (size_t i = 0; i < n;) {
    const unsigned char b = at(i);
    if (b < 0x80) {
      out += char(b);
      ++i;
      continue;
    }
    const size_t len = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) ok = (at(i + k) & 0xC0) == 0x80;
    if (!ok) {
      append_utf8(0xFFFD, out);
      ++i;
      continue;
    }
    uint32_t cpt = b & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) cpt = (cpt << 6) | (at(i + k) & 0x3F);
    if ((cpt >= 0xD800 && cpt <= 0xDFFF) || cpt > 0x10FFFF) cpt = 0xFFFD;
    append_utf8(cpt, out);
    i += len;
  }
  return out;
}

}  // namespace pagoda
