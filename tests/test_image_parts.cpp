// Images in chat requests (protocol/image_parts.h): data URLs and base64 decoded, remote URLs
// refused with how to send the image instead, and image parts of OpenAI chat, the Responses API
// and Anthropic's Messages becoming markers in the content and bytes in order.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pagoda/error.h"
#include "protocol/anthropic_messages.h"
#include "protocol/image_parts.h"
#include "protocol/openai_chat.h"
#include "protocol/responses_api.h"

namespace pagoda::chat {
namespace {

using json = nlohmann::ordered_json;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ImageParts, Base64DecodesWithOrWithoutPaddingAndAcrossLineBreaks) {
  EXPECT_EQ(decode_base64("aGVsbG8=", "x"), "hello");
  EXPECT_EQ(decode_base64("aGVsbG8", "x"), "hello");
  EXPECT_EQ(decode_base64("aGVs\r\nbG8h", "x"), "hello!");
  EXPECT_EQ(decode_base64("", "x"), "");
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(char(i));
  const std::string encoded =
      "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+"
      "P0BBQkNERUZHSElKS0xNTk9QUVJTVF"
      "VWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn+"
      "AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmq"
      "q6ytrq+wsbKztLW2t7i5uru8vb6/wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t/g4eLj5OXm5+jp6uvs7e7v8PHy8/T19vf4+fr7/"
      "P3+/w==";
  EXPECT_EQ(decode_base64(encoded, "x"), all);
}

TEST(ImageParts, BadBase64NamesTheFieldAndTheOffset) {
  EXPECT_EQ(error_of([] { decode_base64("aGV*bG8=", "image"); }), "'image' is not base64: a character at offset 3");
  EXPECT_EQ(error_of([] { decode_base64("aGVsbG8=x", "image"); }),
            "'image' is not base64: data after the padding at offset 8");
  EXPECT_EQ(error_of([] { decode_base64("a", "image"); }), "'image' is not base64: it ends in the middle of a byte");
  EXPECT_EQ(error_of([] { decode_base64("aGVsbG8===", "image"); }),
            "'image' is not base64: it ends in the middle of a byte");
}

TEST(ImageParts, DataUrlsGiveTheirBytesAndRemoteUrlsAreRefusedWithTheWayToSendThem) {
  EXPECT_EQ(image_url_bytes("data:image/png;base64,aGk=", "u"), "hi");
  EXPECT_EQ(image_url_bytes("DATA:image/JPEG;BASE64,aGk=", "u"), "hi");
  EXPECT_EQ(image_url_bytes("data:;base64,aGk=", "u"), "hi");
  for (const char* remote : {"https://example.com/cat.png", "http://10.0.0.1/x", "file:///etc/passwd"}) {
    EXPECT_NE(error_of([&] { image_url_bytes(remote, "u"); }).find("fetches no images over the network"),
              std::string::npos)
        << remote;
  }
  EXPECT_NE(error_of([] { image_url_bytes("data:image/png,rawbytes", "u"); }).find("must be base64"),
            std::string::npos);
  EXPECT_NE(error_of([] { image_url_bytes("data:text/html;base64,aGk=", "u"); }).find("not an image"),
            std::string::npos);
  EXPECT_NE(error_of([] { image_url_bytes("data:image/png;base64", "u"); }).find("without data"), std::string::npos);
  EXPECT_NE(error_of([] { image_url_bytes("cat.png", "u"); }).find("must be a data URL"), std::string::npos);
}

TEST(ImageParts, MarkersAreFreshForEveryRequest) {
  const std::string a = ChatImages::random_image_marker(), b = ChatImages::random_image_marker();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size(), std::string("<__image_0123456789abcdef__>").size());
}

TEST(ImageParts, ChatImagePartsBecomeMarkersWhereTheyStoodAndBytesInOrder) {
  const json messages = json::parse(R"([
    {"role": "system", "content": "look"},
    {"role": "user", "content": [
      {"type": "text", "text": "first "},
      {"type": "image_url", "image_url": {"url": "data:image/png;base64,b25l"}},
      {"type": "text", "text": " then "},
      {"type": "image_url", "image_url": "data:image/webp;base64,dHdv"}]}])");
  ChatImages images;
  const std::vector<ChatMessage> parsed = parse_messages(messages, &images);
  EXPECT_EQ(parsed[1].content, "first " + images.marker + " then " + images.marker);
  EXPECT_EQ(images.images, (std::vector<std::string>{"one", "two"}));
}

TEST(ImageParts, AnImagePartForAModelWithoutImagesSaysSo) {
  const json messages = json::parse(
      R"([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}}]}])");
  EXPECT_NE(error_of([&] { parse_messages(messages); }).find("this model takes no images"), std::string::npos);
  const json bad = json::parse(R"([{"role": "user", "content": [{"type": "audio", "x": 1}]}])");
  EXPECT_NE(error_of([&] { parse_messages(bad); }).find("'messages[0].content[0]' must be a text part"),
            std::string::npos);
}

TEST(ImageParts, ResponsesInputImagesAndAnthropicImageBlocksBecomeChatImageParts) {
  const json responses = json::parse(R"({"input": [{"role": "user", "content": [
      {"type": "input_text", "text": "what is "},
      {"type": "input_image", "image_url": "data:image/png;base64,b25l", "detail": "auto"}]}]})");
  ChatImages images;
  const std::vector<ChatMessage> a = parse_messages(responses::responses_to_chat(responses)["messages"], &images);
  EXPECT_EQ(a.back().content, "what is " + images.marker);
  EXPECT_EQ(images.images, std::vector<std::string>{"one"});

  const json anthropic = json::parse(R"({"max_tokens": 4, "messages": [{"role": "user", "content": [
      {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "dHdv"}},
      {"type": "text", "text": " and this"}]}]})");
  ChatImages more;
  const std::vector<ChatMessage> b = parse_messages(anthropic::to_chat_body(anthropic)["messages"], &more);
  EXPECT_EQ(b.back().content, more.marker + " and this");
  EXPECT_EQ(more.images, std::vector<std::string>{"two"});

  const json by_url = json::parse(R"({"max_tokens": 4, "messages": [{"role": "user", "content": [
      {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]}]})");
  EXPECT_NE(error_of([&] { anthropic::to_chat_body(by_url); }).find("fetches no images"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::chat
