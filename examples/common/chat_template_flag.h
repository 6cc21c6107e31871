#pragma once
// The --chat-template-file FILE flag of pagoda-chat and pagoda-server (llama.cpp's): a Jinja
// chat template that replaces the model's GGUF tokenizer.chat_template.

#include <fstream>
#include <sstream>
#include <string>

#include "examples/common/args.h"
#include "pagoda/error.h"

namespace pagoda::cli {

// The file's text, or "" (the model's own template) when the flag is absent. An unreadable or
// empty file is an error naming it.
inline std::string chat_template_flag(const Args& args) {
  const auto path = args.get("--chat-template-file");
  if (!path) return "";
  std::ifstream file(*path, std::ios::binary);
  if (!file) throw Error("--chat-template-file: cannot read " + *path);
  std::stringstream text;
  text << file.rdbuf();
  if (text.str().empty()) throw Error("--chat-template-file: " + *path + " is empty");
  return text.str();
}

}  // namespace pagoda::cli
