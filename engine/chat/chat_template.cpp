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

// Each turn's text; every turn but an assistant's reply starts on a new line.
std::string plain(const std::vector<ChatMessage>& chat) {
  std::string out;
  for (const ChatMessage& m : chat) {
    if (m.role != "assistant" && !out.empty()) out += '\n';
    out += m.content;
  }
  return out;
}

// "<|role|>\ncontent<end>\n" per message, then the assistant's header: Phi-3 and Zephyr.
std::string role_tags(const Template& t, const std::vector<ChatMessage>& chat, bool open_reply) {
  std::string out;
  for (const ChatMessage& m : chat) out += "<|" + m.role + "|>\n" + m.content + t.end_of_turn + "\n";
  return open_reply ? out + "<|assistant|>\n" : out;
}

std::string chatml(const std::vector<ChatMessage>& chat, bool open_reply) {
  std::string out;
  for (const ChatMessage& m : chat) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  return open_reply ? out + "<|im_start|>assistant\n" : out;
}

std::string llama2(Family f, const std::vector<ChatMessage>& chat) {
  const bool system_tags = f != Family::Llama2;
  const bool bos_inside = f == Family::Llama2SysBos;
  const bool strip = f == Family::Llama2SysStrip;
  std::string out = "[INST] ";  // the first BOS comes from the tokenizer
  bool inside_turn = true;
  for (const ChatMessage& m : chat) {
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

std::string mistral(Family f, const std::vector<ChatMessage>& chat) {
  const std::string lead = f == Family::MistralV1 ? " " : "";
  const std::string trail = f == Family::MistralV3Tekken ? "" : " ";
  std::string out;
  bool inside_turn = false;
  for (const ChatMessage& m : chat) {
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

std::string mistral_v7(const std::vector<ChatMessage>& chat) {
  std::string out;
  for (const ChatMessage& m : chat) {
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
std::string gemma(const std::vector<ChatMessage>& chat, bool open_reply) {
  std::string out, system;
  for (const ChatMessage& m : chat) {
    if (m.role == "system") {
      system += trim(m.content);
      continue;
    }
    const std::string role = m.role == "assistant" ? "model" : m.role;
    out += "<start_of_turn>" + role + "\n";
    if (!system.empty() && role != "model") out += std::exchange(system, {}) + "\n\n";
    out += trim(m.content) + "<end_of_turn>\n";
  }
  return open_reply ? out + "<start_of_turn>model\n" : out;
}

std::string vicuna(Family f, const std::vector<ChatMessage>& chat, bool open_reply) {
  std::string out;
  for (const ChatMessage& m : chat) {
    if (m.role == "system") {
      out += f == Family::VicunaOrca ? "SYSTEM: " + m.content + "\n" : m.content + "\n\n";
    } else if (m.role == "user") {
      out += "USER: " + m.content + "\n";
    } else {
      out += "ASSISTANT: " + m.content + "</s>\n";
    }
  }
  return open_reply ? out + "ASSISTANT:" : out;
}

std::string llama3(const std::vector<ChatMessage>& chat, bool open_reply) {
  std::string out;
  for (const ChatMessage& m : chat) {
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
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
  if (has("USER: ") && has("ASSISTANT: ")) return Template{has("SYSTEM: ") ? Family::VicunaOrca : Family::Vicuna, "</s>"};
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return Template{Family::Llama3, "<|eot_id|>"};
  return std::nullopt;
}

std::string apply_template(const Template& t, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  const std::vector<ChatMessage> chat = checked_roles(messages);
  switch (t.family) {
    case Family::Plain: return plain(chat);
    case Family::ChatML: return chatml(chat, add_generation_prompt);
    case Family::Llama2:
    case Family::Llama2Sys:
    case Family::Llama2SysBos:
    case Family::Llama2SysStrip: return llama2(t.family, chat);
    case Family::MistralV1:
    case Family::MistralV3:
    case Family::MistralV3Tekken: return mistral(t.family, chat);
    case Family::MistralV7: return mistral_v7(chat);
    case Family::Phi3:
    case Family::Zephyr: return role_tags(t, chat, add_generation_prompt);
    case Family::Gemma: return gemma(chat, add_generation_prompt);
    case Family::Llama3: return llama3(chat, add_generation_prompt);
    case Family::Vicuna:
    case Family::VicunaOrca: return vicuna(t.family, chat, add_generation_prompt);
  }
  return {};
}

}  // namespace pagoda::chat
