#pragma once
// The special-token split a chat prompt needs before tokenizing: "<|im_start|>" written in the
// text is one token, not eleven characters of text.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::chat {

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
std::vector<Piece> split_special(std::string_view text, std::vector<Special> specials);

}  // namespace pagoda::chat
