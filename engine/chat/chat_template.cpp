// The template families' layouts. Each follows llama.cpp's llama_chat_apply_template, whose
// tests (tests/test-chat-template.cpp) give the expected prompts tests/test_chat_template.cpp
// checks.

#include "engine/chat/chat_template.h"

#include <cctype>
#include <utility>

#include "pagoda/error.h"

namespace pagoda::chat {

const char* family_name(Family f) {
  switch (f) {
    case Family::Plain: return "plain";
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

namespace {

Family mistral_or_llama2(std::string_view jinja) {
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

std::string trim(std::string_view s) {
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

// The roles every layout below understands.
std::vector<ChatMessage> checked_roles(const std::vector<ChatMessage>& chat) {
  std::vector<ChatMessage> out = chat;
  for (ChatMessage& m : out) {
    if (m.role == "developer") m.role = "system";
    if (m.role != "system" && m.role != "user" && m.role != "assistant") {
      throw Error("chat message role '" + m.role + "' is not one of system, user, assistant");
    }
  }
  return out;
}

// A prompt being laid out, with the byte ranges of the messages' text in it.
struct Text {
  std::string s;
  std::vector<TextSpan> spans;
  Text() = default;
  Text(std::string text) : s(std::move(text)) {}
  Text(const char* text) : s(text) {}
  bool empty() const { return s.empty(); }
  Text& operator+=(const Text& more) {
    for (const TextSpan& sp : more.spans) spans.push_back({sp.begin + s.size(), sp.end + s.size()});
    s += more.s;
    return *this;
  }
};

Text operator+(Text a, const Text& b) { return a += b; }

// A message's text: never parsed for control tokens.
Text data(std::string text) {
  Text t(std::move(text));
  if (!t.s.empty()) t.spans.push_back({0, t.s.size()});
  return t;
}

// Each turn's text; every turn but an assistant's reply starts on a new line.
Text plain(const std::vector<ChatMessage>& chat) {
  Text out;
  for (const ChatMessage& m : chat) {
    if (m.role != "assistant" && !out.empty()) out += "\n";
    out += data(m.content);
  }
  return out;
}

// "<|role|>\ncontent<end>\n" per message, then the assistant's header: Phi-3 and Zephyr.
Text role_tags(const Template& t, const std::vector<ChatMessage>& chat, bool open_reply) {
  Text out;
  for (const ChatMessage& m : chat) out += "<|" + m.role + "|>\n" + data(m.content) + t.end_of_turn + "\n";
  return open_reply ? out + "<|assistant|>\n" : out;
}

Text chatml(const std::vector<ChatMessage>& chat, bool open_reply) {
  Text out;
  for (const ChatMessage& m : chat) out += "<|im_start|>" + m.role + "\n" + data(m.content) + "<|im_end|>\n";
  return open_reply ? out + "<|im_start|>assistant\n" : out;
}

Text llama2(Family f, const std::vector<ChatMessage>& chat) {
  const bool system_tags = f != Family::Llama2;
  const bool bos_inside = f == Family::Llama2SysBos;
  const bool strip = f == Family::Llama2SysStrip;
  Text out = "[INST] ";  // the first BOS comes from the tokenizer
  bool inside_turn = true;
  for (const ChatMessage& m : chat) {
    const Text content = data(strip ? trim(m.content) : m.content);
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

Text mistral(Family f, const std::vector<ChatMessage>& chat) {
  const std::string lead = f == Family::MistralV1 ? " " : "";
  const std::string trail = f == Family::MistralV3Tekken ? "" : " ";
  Text out;
  bool inside_turn = false;
  for (const ChatMessage& m : chat) {
    if (!inside_turn) out += lead + "[INST]" + trail;
    inside_turn = true;
    if (m.role == "system") {
      out += data(m.content) + "\n\n";
    } else if (m.role == "user") {
      out += data(m.content) + lead + "[/INST]";
    } else {
      out += trail + data(f == Family::MistralV3 ? trim(m.content) : m.content) + "</s>";
      inside_turn = false;
    }
  }
  return out;
}

Text mistral_v7(const std::vector<ChatMessage>& chat) {
  Text out;
  for (const ChatMessage& m : chat) {
    if (m.role == "system") {
      out += "[SYSTEM_PROMPT] " + data(m.content) + "[/SYSTEM_PROMPT]";
    } else if (m.role == "user") {
      out += "[INST] " + data(m.content) + "[/INST]";
    } else {
      out += " " + data(m.content) + "</s>";
    }
  }
  return out;
}

// Gemma has no system role: its text opens the next user turn.
Text gemma(const std::vector<ChatMessage>& chat, bool open_reply) {
  Text out, system;
  for (const ChatMessage& m : chat) {
    if (m.role == "system") {
      system += data(trim(m.content));
      continue;
    }
    const std::string role = m.role == "assistant" ? "model" : m.role;
    out += "<start_of_turn>" + role + "\n";
    if (!system.empty() && role != "model") out += std::exchange(system, {}) + "\n\n";
    out += data(trim(m.content)) + "<end_of_turn>\n";
  }
  return open_reply ? out + "<start_of_turn>model\n" : out;
}

Text vicuna(Family f, const std::vector<ChatMessage>& chat, bool open_reply) {
  Text out;
  for (const ChatMessage& m : chat) {
    if (m.role == "system") {
      out += f == Family::VicunaOrca ? "SYSTEM: " + data(m.content) + "\n" : data(m.content) + "\n\n";
    } else if (m.role == "user") {
      out += "USER: " + data(m.content) + "\n";
    } else {
      out += "ASSISTANT: " + data(m.content) + "</s>\n";
    }
  }
  return open_reply ? out + "ASSISTANT:" : out;
}

Text llama3(const std::vector<ChatMessage>& chat, bool open_reply) {
  Text out;
  for (const ChatMessage& m : chat) {
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + data(trim(m.content)) + "<|eot_id|>";
  }
  return open_reply ? out + "<|start_header_id|>assistant<|end_header_id|>\n\n" : out;
}

}  // namespace

std::optional<Template> detect_template(std::string_view jinja, std::string_view eos_token) {
  auto has = [&](std::string_view s) { return jinja.find(s) != std::string_view::npos; };
  if (has("<|im_start|>")) return Template{Family::ChatML, "<|im_end|>"};
  if (has("[INST]")) return Template{mistral_or_llama2(jinja), "</s>"};
  if (has("<|assistant|>") && has("<|end|>")) return Template{Family::Phi3, "<|end|>"};
  if (has("<|user|>")) return Template{Family::Zephyr, has("<|endoftext|>") ? "<|endoftext|>" : std::string(eos_token)};
  if (has("<start_of_turn>")) return Template{Family::Gemma, "<end_of_turn>"};
  if (has("USER: ") && has("ASSISTANT: "))
    return Template{has("SYSTEM: ") ? Family::VicunaOrca : Family::Vicuna, "</s>"};
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return Template{Family::Llama3, "<|eot_id|>"};
  return std::nullopt;
}

ChatPrompt apply_template_prompt(const Template& t, const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt) {
  Text out;
  const std::vector<ChatMessage> chat = checked_roles(messages);
  switch (t.family) {
    case Family::Plain: out = plain(chat); break;
    case Family::ChatML: out = chatml(chat, add_generation_prompt); break;
    case Family::Llama2:
    case Family::Llama2Sys:
    case Family::Llama2SysBos:
    case Family::Llama2SysStrip: out = llama2(t.family, chat); break;
    case Family::MistralV1:
    case Family::MistralV3:
    case Family::MistralV3Tekken: out = mistral(t.family, chat); break;
    case Family::MistralV7: out = mistral_v7(chat); break;
    case Family::Phi3:
    case Family::Zephyr: out = role_tags(t, chat, add_generation_prompt); break;
    case Family::Gemma: out = gemma(chat, add_generation_prompt); break;
    case Family::Llama3: out = llama3(chat, add_generation_prompt); break;
    case Family::Vicuna:
    case Family::VicunaOrca: out = vicuna(t.family, chat, add_generation_prompt); break;
  }
  // Touching ranges (two messages' text with nothing between) are one range.
  ChatPrompt prompt{std::move(out.s), {}};
  for (const TextSpan& sp : out.spans) {
    if (!prompt.data_spans.empty() && prompt.data_spans.back().end == sp.begin) {
      prompt.data_spans.back().end = sp.end;
    } else {
      prompt.data_spans.push_back(sp);
    }
  }
  return prompt;
}

std::string apply_template(const Template& t, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  return apply_template_prompt(t, messages, add_generation_prompt).text;
}

}  // namespace pagoda::chat
