// ChatReplySplitter (protocol/chat_reply): thinking, content and tool calls taken apart
// the same way whether the reply comes whole or in any pieces, so a stream's deltas add up to
// the unstreamed message; tags split across pieces are held back, never leaked as content.

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "protocol/chat_reply.h"

namespace pagoda::chat {
namespace {

struct Split {
  std::string reasoning, content;
  std::vector<ParsedToolCall> calls;
  std::vector<std::string> content_deltas;
};

// Feeds `reply` cut at `cuts` (sorted offsets).
Split run(const ReplyShape& shape, const std::string& reply, const std::vector<size_t>& cuts) {
  ChatReplySplitter s(shape);
  Split out;
  auto take = [&](const ChatReplySplitter::Delta& d) {
    out.reasoning += d.reasoning;
    out.content += d.content;
    if (!d.content.empty()) out.content_deltas.push_back(d.content);
  };
  size_t at = 0;
  for (size_t cut : cuts) {
    take(s.feed(reply.substr(at, cut - at)));
    at = cut;
  }
  take(s.feed(reply.substr(at)));
  take(s.finish());
  out.calls = s.calls();
  return out;
}

ReplyShape tools_shape(ToolCallFormat format, bool reasoning = false) {
  ReplyShape shape;
  shape.reasoning = reasoning;
  shape.tools = ReplyShape::Tools{format, {{"get_weather", R"({"type":"object"})"}, {"add", R"({"type":"object"})"}}};
  return shape;
}

// Every way of cutting the reply into 1 to 4 pieces at random gives what one piece gives.
void expect_cut_invariant(const ReplyShape& shape, const std::string& reply) {
  const Split whole = run(shape, reply, {});
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<size_t> cuts;
    for (int k = rng() % 4; k > 0; --k) cuts.push_back(reply.empty() ? 0 : rng() % reply.size());
    std::sort(cuts.begin(), cuts.end());
    const Split piecewise = run(shape, reply, cuts);
    ASSERT_EQ(piecewise.reasoning, whole.reasoning) << reply;
    ASSERT_EQ(piecewise.content, whole.content) << reply;
    ASSERT_EQ(piecewise.calls.size(), whole.calls.size()) << reply;
    for (size_t i = 0; i < whole.calls.size(); ++i) {
      EXPECT_EQ(piecewise.calls[i].name, whole.calls[i].name);
      EXPECT_EQ(piecewise.calls[i].arguments, whole.calls[i].arguments);
    }
  }
}

TEST(ChatReply, ThinkingGoesToReasoning) {
  ReplyShape shape;
  shape.reasoning = true;
  const Split s = run(shape, "<think>\nLet me see.\n</think>\n\nThe answer is 4.", {});
  EXPECT_EQ(s.reasoning, "\nLet me see.\n");
  EXPECT_EQ(s.content, "The answer is 4.");
  expect_cut_invariant(shape, "<think>\nLet me see.\n</think>\n\nThe answer is 4.");
  // A reply that does not think is all content; a prompt that opened <think> starts inside it.
  EXPECT_EQ(run(shape, "Just 4.", {}).content, "Just 4.");
  shape.starts_in_reasoning = true;
  const Split r1 = run(shape, "hmm</think>4", {});
  EXPECT_EQ(r1.reasoning, "hmm");
  EXPECT_EQ(r1.content, "4");
}

TEST(ChatReply, HermesCallsAreTakenOutOfTheContent) {
  const ReplyShape shape = tools_shape(ToolCallFormat::Hermes, true);
  const std::string reply =
      "<think>need weather</think>Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Oslo\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>";
  const Split s = run(shape, reply, {});
  EXPECT_EQ(s.reasoning, "need weather");
  EXPECT_EQ(s.content, "Checking.");
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(s.calls[1].name, "add");
  expect_cut_invariant(shape, reply);
}

TEST(ChatReply, APartialTagIsHeldBackNotLeaked) {
  const ReplyShape shape = tools_shape(ToolCallFormat::Hermes);
  ChatReplySplitter s(shape);
  EXPECT_EQ(s.feed("Sure <tool").content, "Sure");
  EXPECT_EQ(s.feed("_call>\n{\"name\": \"add\", \"arguments\": {}}").content, "");
  EXPECT_TRUE(s.finish().content.empty());
  ASSERT_EQ(s.calls().size(), 1u);
  // Text that only looked like the start of a tag goes out once it is clear.
  ChatReplySplitter t(shape);
  EXPECT_EQ(t.feed("a <to").content, "a");
  EXPECT_EQ(t.feed("y> b").content, " <toy> b");
}

TEST(ChatReply, AMalformedCallStaysContent) {
  const ReplyShape shape = tools_shape(ToolCallFormat::Hermes);
  const std::string reply = "Hi <tool_call>{\"name\": \"nope\"}</tool_call>";
  const Split s = run(shape, reply, {});
  EXPECT_TRUE(s.calls.empty());
  EXPECT_EQ(s.content, "Hi\n<tool_call>{\"name\": \"nope\"}</tool_call>");
  expect_cut_invariant(shape, reply);
}

TEST(ChatReply, WholeReplyLayouts) {
  for (const auto& [format, reply] : std::vector<std::pair<ToolCallFormat, std::string>>{
           {ToolCallFormat::Llama3, "<|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}"},
           {ToolCallFormat::Llama3, "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}"},
           {ToolCallFormat::Generic, "{\"tool_calls\": [{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]}"},
           {ToolCallFormat::Mistral, "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]"},
           {ToolCallFormat::Mistral, "[{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]"}}) {
    const Split s = run(tools_shape(format), reply, {});
    ASSERT_EQ(s.calls.size(), 1u) << reply;
    EXPECT_EQ(s.calls[0].arguments, R"({"a":1,"b":2})");
    EXPECT_TRUE(s.content.empty()) << s.content;
    expect_cut_invariant(tools_shape(format), reply);
  }
  // Prose first: a Llama reply is then all content, even if JSON follows.
  const Split prose = run(tools_shape(ToolCallFormat::Llama3), "Sure: {\"name\": \"add\"}", {});
  EXPECT_TRUE(prose.calls.empty());
  EXPECT_EQ(prose.content, "Sure: {\"name\": \"add\"}");
}

TEST(ChatReply, ContentIsTrimmedTheSameStreamedOrWhole) {
  ReplyShape shape;
  shape.reasoning = true;
  expect_cut_invariant(shape, "  \n Hello  world \n\n");
  EXPECT_EQ(run(shape, "  \n Hello  world \n\n", {}).content, "Hello  world");
  expect_cut_invariant(tools_shape(ToolCallFormat::Hermes),
                       "\n\nA\n\n<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_call>\n");
}

}  // namespace
}  // namespace pagoda::chat
