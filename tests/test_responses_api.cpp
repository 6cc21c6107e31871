// protocol/responses_api: a Responses body becomes the chat body it means (every input item
// kind, tools, tool_choice, text.format), what a stateless text server cannot do is refused by
// name, and the answer is OpenAI's response object, whose stream of events adds up to it.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pagoda/error.h"
#include "protocol/responses_api.h"

namespace pagoda::responses {
namespace {

using json = nlohmann::ordered_json;

json chat_of(const char* body) { return responses_to_chat(json::parse(body)); }

// The message of the Error translating `body` raises ("" when it raises none).
std::string refusal(const char* body) {
  try {
    responses_to_chat(json::parse(body));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> keys(const json& object) {
  std::vector<std::string> out;
  for (const auto& [key, value] : object.items()) out.push_back(key);
  return out;
}

TEST(ResponsesToChat, AStringInputIsOneUserMessageAfterTheInstructions) {
  const json chat = chat_of(R"({"model": "m", "instructions": "Be brief.", "input": "Hello"})");
  EXPECT_EQ(chat["model"], "m");
  EXPECT_EQ(chat["messages"], json::parse(R"([{"role": "system", "content": "Be brief."},
                                              {"role": "user", "content": "Hello"}])"));
}

TEST(ResponsesToChat, MessagesKeepTheirRolesAndDeveloperBecomesSystem) {
  const json chat = chat_of(R"({"input": [
      {"type": "message", "role": "developer", "content": "Rules."},
      {"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
      {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
       "content": [{"type": "output_text", "text": "c", "annotations": []}]},
      {"role": "system", "content": "More rules."}]})");
  EXPECT_EQ(chat["messages"], json::parse(R"([{"role": "system", "content": "Rules."},
                                              {"role": "user", "content": "ab"},
                                              {"role": "assistant", "content": "c"},
                                              {"role": "system", "content": "More rules."}])"));
}

TEST(ResponsesToChat, FunctionCallsJoinTheAssistantTurnBeforeThemAndOutputsBecomeToolMessages) {
  const json chat = chat_of(R"({"input": [
      {"role": "user", "content": "Weather in Paris and Rome?"},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Two calls."}]},
      {"type": "message", "role": "assistant", "content": "Looking."},
      {"type": "function_call", "call_id": "call_a", "name": "weather", "arguments": "{\"city\":\"Paris\"}"},
      {"type": "function_call", "call_id": "call_b", "name": "weather", "arguments": "{\"city\":\"Rome\"}"},
      {"type": "function_call_output", "call_id": "call_a", "output": "sunny"},
      {"type": "function_call_output", "call_id": "call_b", "output": [{"type": "input_text", "text": "rain"}]}]})");
  EXPECT_EQ(chat["messages"], json::parse(R"([
      {"role": "user", "content": "Weather in Paris and Rome?"},
      {"role": "assistant", "content": "Looking.", "reasoning_content": "Two calls.", "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
        {"id": "call_b", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}]},
      {"role": "tool", "content": "sunny", "tool_call_id": "call_a", "name": "weather"},
      {"role": "tool", "content": "rain", "tool_call_id": "call_b", "name": "weather"}])"));
}

TEST(ResponsesToChat, AFunctionCallAfterAUserMessageOpensAnAssistantTurnWithoutText) {
  const json chat = chat_of(R"({"input": [{"role": "user", "content": "x"},
      {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}]})");
  EXPECT_EQ(chat["messages"][1], json::parse(R"({"role": "assistant", "content": null, "tool_calls": [
      {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})"));
}

TEST(ResponsesToChat, ReasoningNotFollowedByAnAssistantTurnIsDropped) {
  const json chat = chat_of(R"({"input": [
      {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "hm"}]},
      {"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]})");
  EXPECT_EQ(chat["messages"],
            json::parse(R"([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}])"));
}

TEST(ResponsesToChat, FunctionToolsBecomeChatToolsWithTheirKeysInTheOrderSent) {
  const json chat = chat_of(R"({"input": "x", "tools": [{"type": "function", "name": "f", "description": "d",
      "parameters": {"type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}},
      "strict": true}], "tool_choice": {"type": "function", "name": "f"}, "parallel_tool_calls": false})");
  const json& tool = chat["tools"][0];
  EXPECT_EQ(keys(tool), (std::vector<std::string>{"type", "function"}));
  EXPECT_EQ(keys(tool["function"]), (std::vector<std::string>{"name", "description", "parameters", "strict"}));
  EXPECT_EQ(keys(tool["function"]["parameters"]["properties"]), (std::vector<std::string>{"zeta", "alpha"}));
  EXPECT_EQ(chat["tool_choice"], json::parse(R"({"type": "function", "function": {"name": "f"}})"));
  EXPECT_EQ(chat["parallel_tool_calls"], false);
}

TEST(ResponsesToChat, ToolChoiceWordsPassThroughWithTools) {
  const json tools = json::parse(R"([{"type": "function", "name": "f"}])");
  for (const char* word : {"auto", "none", "required"}) {
    const json chat = responses_to_chat({{"input", "x"}, {"tools", tools}, {"tool_choice", word}});
    EXPECT_EQ(chat["tool_choice"], word);
  }
}

TEST(ResponsesToChat, AnEmptyToolListIsNoToolsAndAutoWithoutToolsIsNothing) {
  const json chat = chat_of(R"({"input": "x", "tools": [], "tool_choice": "auto", "parallel_tool_calls": true})");
  EXPECT_FALSE(chat.contains("tools"));
  EXPECT_FALSE(chat.contains("tool_choice"));
  EXPECT_FALSE(chat_of(R"({"input": "x", "tool_choice": "none"})").contains("tool_choice"));
  // "required" with nothing to call stays, for the chat parser to refuse by name.
  EXPECT_EQ(chat_of(R"({"input": "x", "tools": [], "tool_choice": "required"})")["tool_choice"], "required");
}

TEST(ResponsesToChat, AllowedToolsNarrowTheToolsWithTheirMode) {
  const json chat = chat_of(R"({"input": "x", "tools": [{"type": "function", "name": "f"},
      {"type": "function", "name": "g"}, {"type": "function", "name": "h"}],
      "tool_choice": {"type": "allowed_tools", "mode": "required",
                      "tools": [{"type": "function", "name": "h"}, {"type": "function", "name": "f"}]}})");
  ASSERT_EQ(chat["tools"].size(), 2u);
  EXPECT_EQ(chat["tools"][0]["function"]["name"], "f");  // in the order of 'tools'
  EXPECT_EQ(chat["tools"][1]["function"]["name"], "h");
  EXPECT_EQ(chat["tool_choice"], "required");
  EXPECT_NE(refusal(R"({"input": "x", "tools": [{"type": "function", "name": "f"}], "tool_choice":
      {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "zz"}]}})")
                .find("'tool_choice.tools[0]' names 'zz', which is not in 'tools'"),
            std::string::npos);
}

TEST(ResponsesToChat, TextFormatBecomesResponseFormatWithTheSchemaInItsOrder) {
  const json chat = chat_of(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "answer",
      "schema": {"type": "object", "properties": {"zeta": {"type": "integer"}, "answer": {"type": "string"}}},
      "strict": true}}})");
  EXPECT_EQ(chat["response_format"]["type"], "json_schema");
  EXPECT_EQ(keys(chat["response_format"]["json_schema"]), (std::vector<std::string>{"name", "schema", "strict"}));
  EXPECT_EQ(keys(chat["response_format"]["json_schema"]["schema"]["properties"]),
            (std::vector<std::string>{"zeta", "answer"}));
  EXPECT_EQ(chat_of(R"({"input": "x", "text": {"format": {"type": "json_object"}}})")["response_format"],
            json::parse(R"({"type": "json_object"})"));
  EXPECT_FALSE(chat_of(R"({"input": "x", "text": {"format": {"type": "text"}}})").contains("response_format"));
}

TEST(ResponsesToChat, SamplingFieldsAndTheBudgetAreCarriedOver) {
  const json chat = chat_of(R"({"input": "x", "max_output_tokens": 32, "temperature": 0.5, "top_p": 0.9,
      "seed": 7, "stream": true, "store": true, "metadata": {"k": "v"}, "user": "u", "include": [],
      "truncation": "disabled", "reasoning": {"effort": "low"}, "service_tier": "auto"})");
  EXPECT_EQ(chat["max_tokens"], 32);
  EXPECT_EQ(chat["temperature"], 0.5);
  EXPECT_EQ(chat["top_p"], 0.9);
  EXPECT_EQ(chat["seed"], 7);
  EXPECT_EQ(chat["stream"], true);
  for (const char* ignored : {"store", "metadata", "user", "include", "truncation", "reasoning", "service_tier"})
    EXPECT_FALSE(chat.contains(ignored)) << ignored;
}

TEST(ResponsesToChat, StoredStateIsRefusedWithTheReason) {
  EXPECT_EQ(refusal(R"({"input": "x", "previous_response_id": "resp_1"})"),
            "previous_response_id is not supported: this server does not store responses (send the whole "
            "conversation as input)");
  EXPECT_NE(refusal(R"({"input": "x", "conversation": "conv_1"})").find("'conversation' is not supported"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"input": "x", "background": true})").find("'background'"), std::string::npos);
  EXPECT_EQ(refusal(R"({"input": "x", "background": false})"), "");
  EXPECT_NE(
      refusal(R"({"input": [{"type": "item_reference", "id": "msg_1"}]})").find("'input[0]' is an item_reference"),
      std::string::npos);
}

TEST(ResponsesToChat, RefusalsNameTheField) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"({})", "'input' is required"},
      {R"({"input": []})", "'input' is an empty list"},
      {R"({"input": 3})", "'input' must be a string"},
      {R"({"input": [{"role": "user", "content": "x"}, {"type": "function_call", "name": "f", "arguments": "{}"}]})",
       "'input[1].call_id' must be a string"},
      {R"({"input": [{"type": "function_call_output", "call_id": "c"}]})", "'input[0].output' is required"},
      {R"({"input": [{"role": "tool", "content": "x"}]})", "'input[0].role' must be"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]})",
       "'input[0].content[0]' is an input_image by file_id: this server stores no files"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": 3}]}]})",
       "'input[0].content[0].image_url' must be a string"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]})",
       "'input[0].content[0]' is an input_file"},
      {R"({"input": [{"type": "web_search_call", "id": "w"}]})", "'input[0].type' 'web_search_call' is not supported"},
      {R"({"input": "x", "tools": [{"type": "web_search"}]})", "'tools[0]' is a 'web_search' tool"},
      {R"({"input": "x", "tools": [{"type": "function"}]})", "'tools[0].name' must be a string"},
      {R"({"input": "x", "tool_choice": {"type": "file_search"}})", "got the type 'file_search'"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "a"}}})",
       "'text.format.schema' must be a JSON Schema object"},
      {R"({"input": "x", "text": {"format": {"type": "yaml"}}})", "'text.format.type' must be"},
      {R"({"input": "x", "max_output_tokens": 0})", "'max_output_tokens' must be a positive integer"},
      {R"({"input": "x", "instructions": 5})", "'instructions' must be a string"},
  };
  for (const auto& [body, message] : cases)
    EXPECT_NE(refusal(body).find(message), std::string::npos) << body << " → " << refusal(body);
}

TEST(ResponsesToChat, DeepBodiesAreRefusedBeforeAnythingWalksThem) {
  std::string deep = R"({"input": "x", "metadata": )";
  for (int i = 0; i < 200; ++i) deep += "[";
  for (int i = 0; i < 200; ++i) deep += "]";
  deep += "}";
  EXPECT_NE(refusal(deep.c_str()).find("nested deeper than"), std::string::npos);
}

TEST(ResponsesSettings, RepeatTheRequestWithOpenAIsDefaults) {
  const json s = response_settings(json::parse(R"({"input": "x"})"));
  EXPECT_EQ(s["instructions"], nullptr);
  EXPECT_EQ(s["tool_choice"], "auto");
  EXPECT_EQ(s["tools"], json::array());
  EXPECT_EQ(s["text"], json::parse(R"({"format": {"type": "text"}})"));
  EXPECT_EQ(s["parallel_tool_calls"], true);
  const json t = response_settings(json::parse(R"({"input": "x", "instructions": "i", "max_output_tokens": 9,
      "text": {"format": {"type": "json_object"}}, "metadata": {"a": "b"}})"));
  EXPECT_EQ(t["instructions"], "i");
  EXPECT_EQ(t["max_output_tokens"], 9);
  EXPECT_EQ(t["text"]["format"]["type"], "json_object");
  EXPECT_EQ(t["metadata"], json::parse(R"({"a": "b"})"));
}

ResponseInfo info() {
  return {.id = "resp_abc", .created_at = 1700000000, .model = "m", .settings = response_settings({{"input", "x"}})};
}

TEST(ResponsesObject, ATextReplyIsOneCompletedMessage) {
  const json r = response_json(info(), {.text = "Hi."}, {.input_tokens = 5, .output_tokens = 2});
  EXPECT_EQ(r["id"], "resp_abc");
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["incomplete_details"], nullptr);
  EXPECT_EQ(r["store"], false);
  EXPECT_EQ(r["previous_response_id"], nullptr);
  EXPECT_EQ(r["output"], json::parse(R"([{"id": "msg_abc", "type": "message", "status": "completed",
      "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": "Hi."}], "role": "assistant"}])"));
  EXPECT_EQ(r["usage"], json::parse(R"({"input_tokens": 5, "input_tokens_details": {"cached_tokens": 0},
      "output_tokens": 2, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 7})"));
}

TEST(ResponsesObject, ThinkingTextAndCallsAreItemsInThatOrder) {
  const ResponseOutput out{.reasoning = "think", .text = "t", .calls = {{"", "f", "{\"a\":1}"}, {"m1", "g", "{}"}}};
  const json r = response_json(info(), out, {});
  ASSERT_EQ(r["output"].size(), 4u);
  EXPECT_EQ(r["output"][0], json::parse(R"({"id": "rs_abc", "type": "reasoning", "summary": [],
      "content": [{"type": "reasoning_text", "text": "think"}]})"));
  EXPECT_EQ(r["output"][1]["type"], "message");
  EXPECT_EQ(r["output"][2], json::parse(R"({"id": "fc_abc_0", "type": "function_call", "status": "completed",
      "arguments": "{\"a\":1}", "call_id": "call_abc_0", "name": "f"})"));
  EXPECT_EQ(r["output"][3]["call_id"], "m1");  // the id the model wrote
}

TEST(ResponsesObject, ACutByLengthIsIncompleteForMaxOutputTokens) {
  const json r = response_json(info(), {.text = "Hal", .cut_by_length = true}, {});
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"], json::parse(R"({"reason": "max_output_tokens"})"));
  EXPECT_EQ(r["output"][0]["status"], "incomplete");
}

// The events of a stream fed `reasoning` then `text` in pieces, then the calls.
std::vector<json> stream(const ResponseOutput& out, const ResponseUsage& usage) {
  ResponseEventWriter w(info());
  std::vector<json> events = w.start();
  auto add = [&](const ResponseEventWriter::Events& more) { events.insert(events.end(), more.begin(), more.end()); };
  for (size_t i = 0; i < out.reasoning.size(); i += 3) add(w.reasoning(out.reasoning.substr(i, 3)));
  for (size_t i = 0; i < out.text.size(); i += 2) add(w.text(out.text.substr(i, 2)));
  add(w.end(out.calls, out.cut_by_length));
  add(w.finish(usage));
  return events;
}

std::vector<std::string> types(const std::vector<json>& events) {
  std::vector<std::string> out;
  for (const json& e : events) out.push_back(e["type"]);
  return out;
}

TEST(ResponsesStream, SequenceNumbersRunFromZero) {
  const std::vector<json> events = stream({.reasoning = "abcdef", .text = "hello", .calls = {{"", "f", "{}"}}}, {});
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i]["sequence_number"], i);
}

TEST(ResponsesStream, ATextReplyStreamsTheDocumentedEvents) {
  const std::vector<json> events = stream({.text = "abc"}, {.input_tokens = 3, .output_tokens = 2});
  EXPECT_EQ(types(events),
            (std::vector<std::string>{
                "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
                "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
                "response.content_part.done", "response.output_item.done", "response.completed"}));
  EXPECT_EQ(events[0]["response"]["status"], "in_progress");
  EXPECT_EQ(events[0]["response"]["output"], json::array());
  EXPECT_EQ(events[4]["delta"], "ab");
  EXPECT_EQ(events[4]["item_id"], "msg_abc");
  EXPECT_EQ(events[4]["output_index"], 0);
  EXPECT_EQ(events[4]["content_index"], 0);
  EXPECT_EQ(events[4]["logprobs"], json::array());
  EXPECT_EQ(events[6]["text"], "abc");
}

TEST(ResponsesStream, ThinkingIsAReasoningItemBeforeTheMessage) {
  const std::vector<json> events = stream({.reasoning = "hmm", .text = "ok"}, {});
  EXPECT_EQ(types(events),
            (std::vector<std::string>{
                "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
                "response.reasoning_text.delta", "response.reasoning_text.done", "response.content_part.done",
                "response.output_item.done", "response.output_item.added", "response.content_part.added",
                "response.output_text.delta", "response.output_text.done", "response.content_part.done",
                "response.output_item.done", "response.completed"}));
  EXPECT_EQ(events[2]["item"]["type"], "reasoning");
  EXPECT_EQ(events[5]["text"], "hmm");
  EXPECT_EQ(events[8]["output_index"], 1);
}

TEST(ResponsesStream, EachCallIsAnItemWithItsArguments) {
  const std::vector<json> events = stream({.calls = {{"", "f", "{\"x\":1}"}, {"", "g", "{}"}}}, {});
  EXPECT_EQ(types(events),
            (std::vector<std::string>{"response.created", "response.in_progress", "response.output_item.added",
                                      "response.function_call_arguments.delta", "response.function_call_arguments.done",
                                      "response.output_item.done", "response.output_item.added",
                                      "response.function_call_arguments.delta", "response.function_call_arguments.done",
                                      "response.output_item.done", "response.completed"}));
  EXPECT_EQ(events[2]["item"]["arguments"], "");
  EXPECT_EQ(events[2]["item"]["status"], "in_progress");
  EXPECT_EQ(events[3]["delta"], "{\"x\":1}");
  EXPECT_EQ(events[4]["arguments"], "{\"x\":1}");
  EXPECT_EQ(events[6]["output_index"], 1);
  EXPECT_EQ(events[9]["item"]["call_id"], "call_abc_1");
}

TEST(ResponsesStream, TheLastEventHoldsTheWholeResponse) {
  const std::vector<ResponseOutput> outputs = {
      {.text = "plain"},
      {.reasoning = "thinking hard", .text = "answer"},
      {.reasoning = "r", .calls = {{"", "f", "{}"}}},
      {.text = "cut", .cut_by_length = true},
      {.cut_by_length = true},
      {},
  };
  for (const ResponseOutput& out : outputs) {
    const ResponseUsage usage{.input_tokens = 4, .output_tokens = 6};
    const std::vector<json> events = stream(out, usage);
    EXPECT_EQ(events.back()["type"], out.cut_by_length ? "response.incomplete" : "response.completed");
    EXPECT_EQ(events.back()["response"], response_json(info(), out, usage));
  }
}

TEST(ResponsesStream, AFailureIsAnErrorEventThenResponseFailed) {
  ResponseEventWriter w(info());
  w.start();
  w.text("partial");
  const std::vector<json> events = w.fail("server_error", "the model file is gone");
  EXPECT_EQ(types(events), (std::vector<std::string>{"error", "response.failed"}));
  EXPECT_EQ(events[0]["code"], "server_error");
  EXPECT_EQ(events[0]["message"], "the model file is gone");
  EXPECT_EQ(events[0]["param"], nullptr);
  EXPECT_EQ(events[1]["response"]["status"], "failed");
  EXPECT_EQ(events[1]["response"]["error"]["message"], "the model file is gone");
}

TEST(ResponsesSseEvent, NamesTheEventByItsType) {
  EXPECT_EQ(sse_event({{"type", "response.created"}, {"sequence_number", 0}}),
            "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0}\n\n");
}

}  // namespace
}  // namespace pagoda::responses
