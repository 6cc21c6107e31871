// Anthropic's Messages API both ways (protocol/anthropic_messages.h): request bodies as chat
// bodies, replies as messages and as stream events that add up to the same message.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pagoda/error.h"
#include "protocol/anthropic_messages.h"

namespace pagoda::anthropic {
namespace {

using json = nlohmann::ordered_json;

json chat_of(const char* body) { return to_chat_body(json::parse(body)); }

std::string error_of(const char* body, bool for_count = false) {
  try {
    to_chat_body(json::parse(body), for_count);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(AnthropicMessages, SystemTextAndSettingsBecomeAChatBody) {
  const json chat = chat_of(R"({"model": "m", "max_tokens": 9, "system": [{"type": "text", "text": "Be brief."}],
    "messages": [{"role": "user", "content": "Hi"}], "stop_sequences": ["END"], "temperature": 0.5, "top_k": 4,
    "stream": true, "metadata": {"user_id": "u"}})");
  EXPECT_EQ(chat["model"], "m");
  EXPECT_EQ(chat["max_tokens"], 9);
  EXPECT_EQ(chat["stop"], json::array({"END"}));
  EXPECT_EQ(chat["temperature"], 0.5);
  EXPECT_EQ(chat["top_k"], 4);
  EXPECT_EQ(chat["stream"], true);
  ASSERT_EQ(chat["messages"].size(), 2u);
  EXPECT_EQ(chat["messages"][0]["role"], "system");
  EXPECT_EQ(chat["messages"][0]["content"][0]["text"], "Be brief.");
  EXPECT_EQ(chat["messages"][1], json::parse(R"({"role": "user", "content": "Hi"})"));
  EXPECT_FALSE(chat.contains("metadata"));
}

TEST(AnthropicMessages, ToolUseAndToolResultBecomeToolCallsAndToolMessagesInOrder) {
  const json chat = chat_of(R"({"max_tokens": 5, "messages": [
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"},
      {"type": "text", "text": "Let me look."},
      {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"zeta": 1, "alpha": "x"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "21"}]},
      {"type": "text", "text": "Thanks"}]}]})");
  const json& m = chat["messages"];
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[1]["role"], "assistant");
  EXPECT_EQ(m[1]["reasoning_content"], "hm");
  EXPECT_EQ(m[1]["content"][0]["text"], "Let me look.");
  EXPECT_EQ(m[1]["tool_calls"][0]["id"], "toolu_1");
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["name"], "get");
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"], R"({"zeta":1,"alpha":"x"})") << "the input keeps its order";
  EXPECT_EQ(m[2]["role"], "tool");
  EXPECT_EQ(m[2]["tool_call_id"], "toolu_1");
  EXPECT_EQ(m[2]["content"][0]["text"], "21");
  EXPECT_EQ(m[3]["role"], "user");
  EXPECT_EQ(m[3]["content"][0]["text"], "Thanks");
}

TEST(AnthropicMessages, ToolsAndEveryToolChoiceMapToTheirChatForms) {
  const char* tools = R"([{"name": "get", "description": "d", "input_schema": {"type": "object",
    "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}}])";
  auto with_choice = [&](const std::string& choice) {
    return to_chat_body(json::parse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tools": )" +
                                    std::string(tools) + R"(, "tool_choice": )" + choice + "}"));
  };
  const json chat = with_choice(R"({"type": "auto"})");
  EXPECT_EQ(chat["tools"][0]["type"], "function");
  EXPECT_EQ(chat["tools"][0]["function"]["name"], "get");
  EXPECT_EQ(chat["tools"][0]["function"]["parameters"].dump(),
            R"({"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}})");
  EXPECT_EQ(chat["tool_choice"], "auto");
  EXPECT_EQ(with_choice(R"({"type": "any"})")["tool_choice"], "required");
  EXPECT_EQ(with_choice(R"({"type": "none"})")["tool_choice"], "none");
  const json named = with_choice(R"({"type": "tool", "name": "get", "disable_parallel_tool_use": true})");
  EXPECT_EQ(named["tool_choice"]["function"]["name"], "get");
  EXPECT_EQ(named["parallel_tool_calls"], false);
}

TEST(AnthropicMessages, ThinkingSwitchesTheTemplatesThinking) {
  const json on = chat_of(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
    "thinking": {"type": "enabled", "budget_tokens": 1024}})");
  EXPECT_EQ(on["chat_template_kwargs"]["enable_thinking"], true);
  const json off = chat_of(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
    "thinking": {"type": "disabled"}})");
  EXPECT_EQ(off["chat_template_kwargs"]["enable_thinking"], false);
}

TEST(AnthropicMessages, MalformedBodiesAreErrorsNamingTheField) {
  EXPECT_NE(error_of(R"({"messages": [{"role": "user", "content": "x"}]})").find("'max_tokens' is required"),
            std::string::npos);
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "x"}]})", true), "no error")
      << "count_tokens needs no max_tokens";
  EXPECT_NE(error_of(R"({"max_tokens": 0, "messages": [{"role": "user", "content": "x"}]})").find("at least 1"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"max_tokens": "9", "messages": [{"role": "user", "content": "x"}]})").find("'max_tokens'"),
            std::string::npos);
  EXPECT_EQ(chat_of(R"({"max_tokens": 99999999999999, "messages": [{"role": "user", "content": "x"}]})")["max_tokens"],
            INT32_MAX);
  EXPECT_NE(error_of(R"({"max_tokens": 1, "messages": []})").find("'messages'"), std::string::npos);
  EXPECT_NE(error_of(R"({"max_tokens": 1, "messages": [{"role": "system", "content": "x"}]})").find("messages[0].role"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "image"}]}]})")
                .find("'messages[0].content[0].source' must be an object"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "document"}]}]})")
                .find("'messages[0].content[0]' is a 'document' block: this server reads text and images only"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]})")
                .find("messages[0].content[0].tool_use_id"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}],
    "tools": [{"type": "web_search_20250305", "name": "web_search"}]})")
                .find("server tools"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}],
    "tool_choice": {"type": "sometimes"}})")
                .find("'tool_choice.type'"),
            std::string::npos);
}

Reply reply_with_everything() {
  Reply r;
  r.thinking = "Let me think.";
  r.text = "Looking it up.";
  r.calls = {{.id = "", .name = "get", .arguments = R"({"zeta":1,"alpha":"x"})"}};
  r.finish = FinishReason::Stop;
  r.input_tokens = 10;
  r.output_tokens = 7;
  return r;
}

TEST(AnthropicMessages, AReplyBecomesThinkingTextAndToolUseBlocks) {
  const Reply r = reply_with_everything();
  const json m = message_json("msg_1", "m", r, {"toolu_x"});
  EXPECT_EQ(m["type"], "message");
  ASSERT_EQ(m["content"].size(), 3u);
  EXPECT_EQ(m["content"][0]["type"], "thinking");
  EXPECT_EQ(m["content"][0]["thinking"], "Let me think.");
  EXPECT_EQ(m["content"][1]["text"], "Looking it up.");
  EXPECT_EQ(m["content"][2]["id"], "toolu_x");
  EXPECT_EQ(m["content"][2]["input"].dump(), R"({"zeta":1,"alpha":"x"})");
  EXPECT_EQ(m["stop_reason"], "tool_use");
  EXPECT_EQ(m["usage"]["input_tokens"], 10);
  EXPECT_EQ(m["usage"]["output_tokens"], 7);
}

TEST(AnthropicMessages, StopReasonsFollowHowTheReplyEnded) {
  Reply r;
  EXPECT_STREQ(stop_reason(r), "end_turn");
  r.stop_sequence = "END";
  EXPECT_STREQ(stop_reason(r), "stop_sequence");
  EXPECT_EQ(message_json("m", "m", r, {})["stop_sequence"], "END");
  r.finish = FinishReason::Length;
  EXPECT_STREQ(stop_reason(r), "max_tokens");
  r.calls = {{.id = "t1", .name = "f", .arguments = "{}"}};
  EXPECT_STREQ(stop_reason(r), "tool_use");
  EXPECT_EQ(tool_use_id(r.calls[0]), "t1") << "an id the model wrote is kept";
}

TEST(AnthropicMessages, StreamEventsAddUpToTheWholeMessage) {
  const Reply r = reply_with_everything();
  MessageEvents events("msg_1", "m");
  std::vector<MessageEvents::Event> all = events.start(r.input_tokens);
  auto add = [&](std::vector<MessageEvents::Event> more) { all.insert(all.end(), more.begin(), more.end()); };
  add(events.thinking("Let me "));
  add(events.thinking("think."));
  add(events.text(""));
  add(events.text("Looking "));
  add(events.text("it up."));
  add(events.finish(r));

  // Rebuild the message as a client does.
  json message;
  std::vector<std::string> partial_input;
  for (const auto& [name, body] : all) {
    ASSERT_EQ(name, body["type"]) << "each event is named by its type";
    if (name == "message_start") message = body["message"];
    if (name == "content_block_start") {
      ASSERT_EQ(body["index"], message["content"].size()) << "blocks are numbered in order";
      message["content"].push_back(body["content_block"]);
      partial_input.emplace_back();
    }
    if (name == "content_block_delta") {
      json& block = message["content"][body["index"].get<size_t>()];
      const json& d = body["delta"];
      if (d["type"] == "thinking_delta")
        block["thinking"] = block["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      if (d["type"] == "text_delta") block["text"] = block["text"].get<std::string>() + d["text"].get<std::string>();
      if (d["type"] == "input_json_delta")
        partial_input[body["index"].get<size_t>()] += d["partial_json"].get<std::string>();
    }
    if (name == "content_block_stop") {
      json& block = message["content"][body["index"].get<size_t>()];
      if (block["type"] == "tool_use") block["input"] = json::parse(partial_input[body["index"].get<size_t>()]);
    }
    if (name == "message_delta") {
      message["stop_reason"] = body["delta"]["stop_reason"];
      message["stop_sequence"] = body["delta"]["stop_sequence"];
      message["usage"]["output_tokens"] = body["usage"]["output_tokens"];
    }
  }
  EXPECT_EQ(all.back().first, "message_stop");
  // The tool_use id is made up per answer: take the stream's for the whole message.
  const json whole = message_json("msg_1", "m", r, {message["content"][2]["id"].get<std::string>()});
  EXPECT_EQ(message.dump(), whole.dump());
}

TEST(AnthropicMessages, ErrorsCarryAnthropicsTypeForTheStatus) {
  EXPECT_EQ(error_json(400, "bad")["error"]["type"], "invalid_request_error");
  EXPECT_EQ(error_json(401, "key")["error"]["type"], "authentication_error");
  EXPECT_EQ(error_json(404, "model")["error"]["type"], "not_found_error");
  EXPECT_EQ(error_json(503, "busy")["error"]["type"], "overloaded_error");
  EXPECT_EQ(error_json(500, "oops")["error"]["type"], "api_error");
  EXPECT_EQ(error_json(400, "bad")["type"], "error");
  EXPECT_EQ(error_json(400, "bad")["error"]["message"], "bad");
}

}  // namespace
}  // namespace pagoda::anthropic
