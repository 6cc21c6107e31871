#include "engine/tokenizer/special_tokens.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <initializer_list>
#include <string>
#include <string_view>

#include "engine/tokenizer/tokenizer.h"

namespace pagoda {

namespace {

// llama.cpp finds these by their text when the file names no id for them (llama-vocab.cpp,
// "auto-detect special tokens by text").
constexpr std::array<std::string_view, 11> kEndOfTurnTexts = {"<|eot_id|>",
                                                              "<|im_end|>",
                                                              "<|end|>",
                                                              "<end_of_turn>",
                                                              "<|endoftext|>",
                                                              "<|end_of_text|>",
                                                              "<EOT>",
                                                              "_<EOT>",
                                                              "[EOT]",
                                                              "<\xEF\xBD\x9C"
                                                              "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                                              "<end_of_utterance>"};
constexpr std::array<std::string_view, 8> kFimPrefixTexts = {"<|fim_prefix|>",
                                                             "<fim-prefix>",
                                                             "<fim_prefix>",
                                                             "<\xEF\xBD\x9C"
                                                             "fim\xE2\x96\x81"
                                                             "begin\xEF\xBD\x9C>",
                                                             "<PRE>",
                                                             "\xE2\x96\x81<PRE>",
                                                             "<|code_prefix|>",
                                                             "<|prefix|>"};
constexpr std::array<std::string_view, 8> kFimSuffixTexts = {"<|fim_suffix|>",
                                                             "<fim-suffix>",
                                                             "<fim_suffix>",
                                                             "<\xEF\xBD\x9C"
                                                             "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
                                                             "<SUF>",
                                                             "\xE2\x96\x81<SUF>",
                                                             "<|code_suffix|>",
                                                             "<|suffix|>"};
constexpr std::array<std::string_view, 8> kFimMiddleTexts = {"<|fim_middle|>",
                                                             "<fim-middle>",
                                                             "<fim_middle>",
                                                             "<\xEF\xBD\x9C"
                                                             "fim\xE2\x96\x81"
                                                             "end\xEF\xBD\x9C>",
                                                             "<MID>",
                                                             "\xE2\x96\x81<MID>",
                                                             "<|code_middle|>",
                                                             "<|middle|>"};
constexpr std::array<std::string_view, 5> kFimPadTexts = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::array<std::string_view, 5> kFimRepoTexts = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                                                           "<reponame>"};
constexpr std::array<std::string_view, 1> kFimSeparatorTexts = {"<|file_sep|>"};
// The tokens llama.cpp puts in the end-of-generation set by their text.
constexpr std::array<std::string_view, 22> kEndOfGenerationTexts = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "[e~["};
// gpt-oss renders these, whatever their type.
constexpr std::array<std::string_view, 4> kAlwaysRenderedTexts = {"<|channel|>", "<|message|>", "<|start|>",
                                                                  "<|constrain|>"};

// C's isspace in the "C" locale, as llama.cpp strips with.
bool is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

template <size_t N>
bool among(std::string_view text, const std::array<std::string_view, N>& texts) {
  return std::find(texts.begin(), texts.end(), text) != texts.end();
}

// The ids of the tokens spelled as one of `texts`.
template <size_t N>
std::vector<int32_t> ids_spelled(const TokenizerVocab& v, const std::array<std::string_view, N>& texts) {
  std::vector<int32_t> out;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    if (among(v.tokens[id], texts)) out.push_back(int32_t(id));
  }
  return out;
}

}  // namespace

void apply_special_token_overrides(TokenizerVocab& v) {
  const bool eot_named = v.eot_id >= 0, eom_named = v.eom_id >= 0;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const std::string_view t = v.tokens[id];
    if (among(t, kAlwaysRenderedTexts)) {
      v.types[id] = TokenType::UserDefined;
      continue;
    }
    const bool control_looking =
        (!eot_named && among(t, kEndOfTurnTexts)) || (!eom_named && t == "<|eom_id|>") ||
        (v.fim_pad_id < 0 && among(t, kFimPadTexts)) || (v.fim_rep_id < 0 && among(t, kFimRepoTexts)) ||
        (v.fim_sep_id < 0 && among(t, kFimSeparatorTexts)) || among(t, kFimPrefixTexts) || among(t, kFimSuffixTexts) ||
        among(t, kFimMiddleTexts) || among(t, kEndOfGenerationTexts);
    if (control_looking) v.types[id] = TokenType::Control;
  }
  // llama.cpp's two exceptions to the end-of-generation set (see end_of_generation_ids) retype
  // the token they take out: gpt-oss's (and solar-open's) <|end|> becomes user-defined,
  // gemma4's </s> ordinary text.
  auto has = [&](std::string_view text) { return std::find(v.tokens.begin(), v.tokens.end(), text) != v.tokens.end(); };
  auto retype = [&](std::string_view text, TokenType type) {
    for (size_t id = 0; id < v.tokens.size(); ++id) {
      if (v.tokens[id] == text) v.types[id] = type;
    }
  };
  const bool has_call = has("<|call|>") || has("<|calls|>");
  if (has("<|end|>") && ((has("<|return|>") && has_call) || (has_call && has("<|flush|>")))) {
    retype("<|end|>", TokenType::UserDefined);
  }
  if (has("</s>") && has("<|tool_response>")) retype("</s>", TokenType::Normal);
}

std::vector<int32_t> end_of_generation_ids(const TokenizerVocab& v) {
  std::vector<int32_t> eog;
  auto add = [&](const std::vector<int32_t>& ids) { eog.insert(eog.end(), ids.begin(), ids.end()); };
  add(v.fim_pad_id >= 0 ? std::vector<int32_t>{v.fim_pad_id} : ids_spelled(v, kFimPadTexts));
  add(v.fim_rep_id >= 0 ? std::vector<int32_t>{v.fim_rep_id} : ids_spelled(v, kFimRepoTexts));
  add(v.fim_sep_id >= 0 ? std::vector<int32_t>{v.fim_sep_id} : ids_spelled(v, kFimSeparatorTexts));
  add(ids_spelled(v, kEndOfGenerationTexts));
  for (int32_t id : {v.eos_id, v.eot_id, v.eom_id}) {
    if (id >= 0) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());

  // llama.cpp's exceptions: with gpt-oss's "<|return|>" and "<|call|>" (or solar-open's
  // "<|calls|>" and "<|flush|>"), "<|end|>" only ends a message; with gemma4's
  // "<|tool_response>", "</s>" is ordinary.
  auto has = [&](std::string_view text) {
    return std::any_of(eog.begin(), eog.end(), [&](int32_t id) { return v.tokens[size_t(id)] == text; });
  };
  auto drop = [&](std::string_view text) {
    std::erase_if(eog, [&](int32_t id) { return v.tokens[size_t(id)] == text; });
  };
  const bool has_call = has("<|call|>") || has("<|calls|>");
  if (has("<|end|>") && ((has("<|return|>") && has_call) || (has_call && has("<|flush|>")))) drop("<|end|>");
  if (has("<|tool_response>")) drop("</s>");
  return eog;
}

SpecialTokenSplitter::SpecialTokenSplitter(const TokenizerVocab& v) {
  // llama.cpp's "set attributes by model/tokenizer/architecture name" (llama-vocab.cpp).
  std::string name = v.model_name;
  for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
  auto contains_any = [](std::string_view s, std::initializer_list<std::string_view> parts) {
    return std::any_of(parts.begin(), parts.end(), [&](std::string_view p) { return s.find(p) != s.npos; });
  };
  std::string_view lstrip_mask;  // the one token that drops the whitespace before it
  bool phi3 = false;
  if (contains_any(v.pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
      contains_any(v.architecture, {"nomic-bert-moe", "jina-bert-v3"})) {
    lstrip_mask = "<mask>";
  } else if (contains_any(name, {"phi-3", "phi3"})) {
    phi3 = true;
  } else if (contains_any(name, {"modern-bert"})) {
    lstrip_mask = "[MASK]";
  }

  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const TokenType type = v.types[id];
    const std::string& t = v.tokens[id];
    if (t.empty()) continue;
    if (type == TokenType::Control || type == TokenType::UserDefined || type == TokenType::Unknown) {
      Candidate c{int32_t(id), t, type == TokenType::UserDefined};
      c.lstrip = !lstrip_mask.empty() && t == lstrip_mask;
      c.rstrip = phi3 && t != "<unk>" && t != "<s>" && t != "<|endoftext|>";
      candidates_.push_back(std::move(c));
      any_user_defined_ = any_user_defined_ || type == TokenType::UserDefined;
    }
  }
  std::stable_sort(candidates_.begin(), candidates_.end(),
                   [](const Candidate& a, const Candidate& b) { return a.text.size() > b.text.size(); });
}

std::vector<Fragment> SpecialTokenSplitter::split(std::string_view text, bool parse_special,
                                                  std::span<const TextSpan> data) const {
  // Whether bytes [begin, end) of `text` touch data: the first range ending after `begin`
  // decides, the ranges being sorted.
  auto in_data = [&](size_t begin, size_t end) {
    auto it = std::upper_bound(data.begin(), data.end(), begin, [](size_t b, const TextSpan& s) { return b < s.end; });
    return it != data.end() && it->begin < end;
  };
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, text});
  if (!parse_special && !any_user_defined_) return fragments;

  std::vector<Fragment> next;
  for (const Candidate& c : candidates_) {
    if (!parse_special && !c.user_defined) continue;
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      size_t from = 0;
      for (size_t hit; (hit = rest.find(c.text, from)) != std::string_view::npos;) {
        const size_t at = size_t(rest.data() - text.data()) + hit;
        if (!c.user_defined && in_data(at, at + c.text.size())) {
          from = hit + 1;
          continue;
        }
        from = 0;
        std::string_view left = rest.substr(0, hit);
        if (c.lstrip) {
          while (!left.empty() && is_ascii_space(left.back())) left.remove_suffix(1);
        }
        if (!left.empty()) next.push_back({-1, left});
        next.push_back({c.id, {}});
        rest.remove_prefix(hit + c.text.size());
        if (c.rstrip) {
          while (!rest.empty() && is_ascii_space(rest.front())) rest.remove_prefix(1);
        }
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace pagoda
