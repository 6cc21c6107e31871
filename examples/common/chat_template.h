#pragma once
// Chat prompts without a Jinja interpreter, as llama.cpp's llama_chat_apply_template does it:
// recognise a well-known template family by distinctive substrings of the model's
// tokenizer.chat_template, then lay the turns out in that family's format in C++. Also the
// special-token split a chat prompt needs before tokenizing ("<|im_start|>" is one token, not
// eleven characters of text).

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pagoda::chat {

struct Message {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

enum class Family {
  ChatML,
  Llama2,          // [INST] ... [/INST], a system message folded into the first turn
  Llama2Sys,       // with <<SYS>> ... <</SYS>>
  Llama2SysBos,    // and <s> before each later [INST]
  Llama2SysStrip,  // and contents stripped of surrounding whitespace
  MistralV1,
  MistralV3,
  MistralV3Tekken,
  MistralV7,
  Phi3,
  Zephyr,
  Gemma,
  Llama3,
  Vicuna,
  VicunaOrca,
};

struct Template {
  Family family;
  std::string end_of_turn;  // what closes a turn; generation stops there
};

// llama.cpp's names for the families.
inline const char* family_name(Family f) {
  switch (f) {
    case Family::ChatML: return "chatml";
    case Family::Llama2: return "llama2";
    case Family::Llama2Sys: return "llama2-sys";
    case Family::Llama2SysBos: return "llama2-sys-bos";
    case Family::Llama2SysStrip: return "llama2-sys-strip";
    case Family::MistralV1: return "mistral-v1";
    case Family::MistralV3: return "mistral-v3";
    case Family::MistralV3Tekken: return "mistral-v3-tekken";
    case Family::MistralV7: return "mistral-v7";
    case Family::Phi3: return "phi3";
    case Family::Zephyr: return "zephyr";
    case Family::Gemma: return "gemma";
    case Family::Llama3: return "llama3";
    case Family::Vicuna: return "vicuna";
    case Family::VicunaOrca: return "vicuna-orca";
  }
  return "?";
}

namespace detail {

inline Family mistral_or_llama2(std::string_view jinja) {
  auto has = [&](std::string_view s) { return jinja.find(s) != std::string_view::npos; };
  if (has("[SYSTEM_PROMPT]")) return Family::MistralV7;
  // The official v1 template names system_message after " [INST] "; v3 and v3-tekken list tools.
  if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
    if (has(" [INST]")) return Family::MistralV1;
    if (has("\"[INST]\"")) return Family::MistralV3Tekken;
    return Family::MistralV3;
  }
  if (has("content.strip()")) return Family::Llama2SysStrip;
  if (has("bos_token + '[INST]")) return Family::Llama2SysBos;
  if (has("<<SYS>>")) return Family::Llama2Sys;
  return Family::Llama2;
}

}  // namespace detail

// The family of a Jinja chat template, checked in llama.cpp's order; nullopt when none matches.
// `eos_token` is the model's EOS spelling, which some templates end their turns with.
//
// One deliberate difference: llama.cpp sends templates with <|user|> and <|assistant|> but no
// literal "</s>" to GLM-Edge, which misses Zephyr-7B and TinyLlama-Chat (they write eos_token);
// here any <|user|> template that is not Phi-3 is Zephyr, ending turns with <|endoftext|> when
// the template names it and with the model's EOS otherwise.
inline std::optional<Template> detect_template(std::string_view jinja, std::string_view eos_token) {
  auto has = [&](std::string_view s) { return jinja.find(s) != std::string_view::npos; };
  if (has("<|im_start|>")) return Template{Family::ChatML, "<|im_end|>"};
  if (has("[INST]")) return Template{detail::mistral_or_llama2(jinja), "</s>"};
  if (has("<|assistant|>") && has("<|end|>")) return Template{Family::Phi3, "<|end|>"};
  if (has("<|user|>")) return Template{Family::Zephyr, has("<|endoftext|>") ? "<|endoftext|>" : std::string(eos_token)};
  if (has("<start_of_turn>")) return Template{Family::Gemma, "<end_of_turn>"};
  if (has("USER: ") && has("ASSISTANT: ")) return Template{has("SYSTEM: ") ? Family::VicunaOrca : Family::Vicuna, "</s>"};
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return Template{Family::Llama3, "<|eot_id|>"};
  return std::nullopt;
}

namespace detail {

inline std::string trim(std::string_view s) {
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

// "<|role|>\ncontent<end>\n" per message, then the assistant's header: Phi-3 and Zephyr.
inline std::string role_tags(const Template& t, const std::vector<Message>& chat) {
  std::string out;
  for (const Message& m : chat) out += "<|" + m.role + "|>\n" + m.content + t.end_of_turn + "\n";
  return out + "<|assistant|>\n";
}

inline std::string chatml(const std::vector<Message>& chat) {
  std::string out;
  for (const Message& m : chat) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  return out + "<|im_start|>assistant\n";
}

inline std::string llama2(Family f, const std::vector<Message>& chat) {
  const bool system_tags = f != Family::Llama2;
  const bool bos_inside = f == Family::Llama2SysBos;
  const bool strip = f == Family::Llama2SysStrip;
  std::string out = "[INST] ";  // the first BOS comes from the tokenizer
  bool inside_turn = true;
  for (const Message& m : chat) {
    const std::string content = strip ? trim(m.content) : m.content;
    if (!inside_turn) out += bos_inside ? "<s>[INST] " : "[INST] ";
    inside_turn = true;
    if (m.role == "system") {
      out += system_tags ? "<<SYS>>\n" + content + "\n<</SYS>>\n\n" : content + "\n";
    } else if (m.role == "user") {
      out += content + " [/INST]";
    } else {
      out += content + "</s>";
      inside_turn = false;
    }
  }
  return out;
}

inline std::string mistral(Family f, const std::vector<Message>& chat) {
  const std::string lead = f == Family::MistralV1 ? " " : "";
  const std::string trail = f == Family::MistralV3Tekken ? "" : " ";
  std::string out;
  bool inside_turn = false;
  for (const Message& m : chat) {
    if (!inside_turn) out += lead + "[INST]" + trail;
    inside_turn = true;
    if (m.role == "system") {
      out += m.content + "\n\n";
    } else if (m.role == "user") {
      out += m.content + lead + "[/INST]";
    } else {
      out += trail + (f == Family::MistralV3 ? trim(m.content) : m.content) + "</s>";
      inside_turn = false;
    }
  }
  return out;
}

inline std::string mistral_v7(const std::vector<Message>& chat) {
  std::string out;
  for (const Message& m : chat) {
    if (m.role == "system") {
      out += "[SYSTEM_PROMPT] " + m.content + "[/SYSTEM_PROMPT]";
    } else if (m.role == "user") {
      out += "[INST] " + m.content + "[/INST]";
    } else {
      out += " " + m.content + "</s>";
    }
  }
  return out;
}

// Gemma has no system role: its text opens the next user turn.
inline std::string gemma(const std::vector<Message>& chat) {
  std::string out, system;
  for (const Message& m : chat) {
    if (m.role == "system") {
      system += trim(m.content);
      continue;
    }
    const std::string role = m.role == "assistant" ? "model" : m.role;
    out += "<start_of_turn>" + role + "\n";
    if (!system.empty() && role != "model") out += std::exchange(system, {}) + "\n\n";
    out += trim(m.content) + "<end_of_turn>\n";
  }
  return out + "<start_of_turn>model\n";
}

inline std::string vicuna(Family f, const std::vector<Message>& chat) {
  std::string out;
  for (const Message& m : chat) {
    if (m.role == "system") {
      out += f == Family::VicunaOrca ? "SYSTEM: " + m.content + "\n" : m.content + "\n\n";
    } else if (m.role == "user") {
      out += "USER: " + m.content + "\n";
    } else {
      out += "ASSISTANT: " + m.content + "</s>\n";
    }
  }
  return out + "ASSISTANT:";
}

inline std::string llama3(const std::vector<Message>& chat) {
  std::string out;
  for (const Message& m : chat) {
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
  }
  return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

}  // namespace detail

// The prompt for `chat` in the template's format, ending where the assistant's reply begins.
inline std::string apply_template(const Template& t, const std::vector<Message>& chat) {
  switch (t.family) {
    case Family::ChatML: return detail::chatml(chat);
    case Family::Llama2:
    case Family::Llama2Sys:
    case Family::Llama2SysBos:
    case Family::Llama2SysStrip: return detail::llama2(t.family, chat);
    case Family::MistralV1:
    case Family::MistralV3:
    case Family::MistralV3Tekken: return detail::mistral(t.family, chat);
    case Family::MistralV7: return detail::mistral_v7(chat);
    case Family::Phi3:
    case Family::Zephyr: return detail::role_tags(t, chat);
    case Family::Gemma: return detail::gemma(chat);
    case Family::Llama3: return detail::llama3(chat);
    case Family::Vicuna:
    case Family::VicunaOrca: return detail::vicuna(t.family, chat);
  }
  return {};
}

// A token whose spelling in a prompt stands for the token itself (Control and UserDefined
// tokens: "<s>", "<|im_start|>").
struct Special {
  std::string text;
  int32_t id;
};

// A run of ordinary text (id < 0), or one special token.
struct Piece {
  std::string text;
  int32_t id = -1;
};

// Cuts `text` at every occurrence of a special token's spelling, the longest one where several
// start at the same place, as llama.cpp's tokenizer does when it parses specials.
inline std::vector<Piece> split_special(std::string_view text, std::vector<Special> specials) {
  std::erase_if(specials, [](const Special& s) { return s.text.empty(); });
  std::stable_sort(specials.begin(), specials.end(),
                   [](const Special& a, const Special& b) { return a.text.size() > b.text.size(); });
  std::array<bool, 256> starts{};  // bytes a special can start with: the rest is skipped fast
  for (const Special& s : specials) starts[static_cast<unsigned char>(s.text[0])] = true;

  std::vector<Piece> out;
  std::string run;
  for (size_t i = 0; i < text.size();) {
    const Special* hit = nullptr;
    if (starts[static_cast<unsigned char>(text[i])]) {
      for (const Special& s : specials) {
        if (text.substr(i).starts_with(s.text)) {
          hit = &s;
          break;
        }
      }
    }
    if (!hit) {
      run += text[i++];
      continue;
    }
    if (!run.empty()) out.push_back({std::exchange(run, {}), -1});
    out.push_back({hit->text, hit->id});
    i += hit->text.size();
  }
  if (!run.empty()) out.push_back({std::move(run), -1});
  return out;
}

}  // namespace pagoda::chat
