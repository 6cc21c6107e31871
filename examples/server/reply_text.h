#pragma once
// A chat reply's text token by token as ChatReplySplitter reads it: what the stream carries,
// except that a control token a tool-call layout begins with (Mistral's [TOOL_CALLS], Llama's
// <|python_tag|>) is spelled out where the streamed text leaves it out. The tokens that end the
// reply (end of generation, stop ids) still add nothing.

#include <cstdint>
#include <string>
#include <unordered_map>

#include "pagoda/engine.h"
#include "pagoda/request.h"

namespace pagoda::server {

class ReplyText {
 public:
  ReplyText(const Engine& engine, const Request& request);

  std::string piece(const StreamEvent& event) const;

 private:
  std::unordered_map<int32_t, std::string> spelled_;  // special tokens that do not end the reply
};

}  // namespace pagoda::server
