#pragma once
// Images in chat requests: the bytes an OpenAI image_url part, a Responses input_image or an
// Anthropic image block carries. pagoda fetches nothing over the network, so an image comes
// inline: a data URL (data:image/png;base64,...), or Anthropic's base64 source; a remote URL is
// refused with a message saying how to send the image instead.
//
// In the parsed messages an image is a marker in its message's content, where the part stood,
// and its bytes go to ChatImages in the order of the parts. The marker is drawn at random for
// each request, so no text a user writes can stand for an image.

#include <string>
#include <string_view>
#include <vector>

namespace pagoda::chat {

struct ChatImages {
  std::string marker = random_image_marker();  // what stands for each image in the content
  std::vector<std::string> images;             // the images' file bytes, in the parts' order

  // A marker no client can guess: "<__image_" and 16 random hex digits "__>".
  static std::string random_image_marker();
};

// The bytes of an image given by URL, a data URL with base64 data; pagoda::Error naming `path`
// for a remote URL (http, https, file: never fetched), a data URL that is not base64 or not an
// image type, and base64 that does not decode.
std::string image_url_bytes(std::string_view url, const std::string& path);

// Standard base64 (RFC 4648 §4) decoded: whitespace between characters is skipped and padding
// is optional, as MIME-wrapped data needs. pagoda::Error naming `path` and the offset of the
// first character that is not base64 (or misplaced padding).
std::string decode_base64(std::string_view text, const std::string& path);

}  // namespace pagoda::chat
