// The OpenAI request fields pagoda-server understands (and vLLM's sampling extensions: top_k,
// min_p, repetition_penalty, min_tokens, stop_token_ids, ignore_eos), their types and ranges.
// Fields it does not know are ignored, as OpenAI's own server and vLLM do; options it cannot
// honour (suffix) are refused with a message rather than ignored.

#include "examples/server/openai_request.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "protocol/openai_chat.h"
#include "engine/grammar/json_schema.h"
#include "examples/server/api_error.h"
#include "examples/server/json_body.h"
#include "pagoda/error.h"
#include "protocol/json_fields.h"

namespace pagoda::server {

namespace {

using json = nlohmann::ordered_json;

using protocol::field;

std::optional<double> number(const json& body, const char* name, double lo, double hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw bad_request(std::string("'") + name + "' must be a number");
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    throw bad_request(std::string("'") + name + "' must be between " + json(lo).dump() + " and " + json(hi).dump() +
                      ", got " + v->dump());
  }
  return x;
}

std::optional<int64_t> integer(const json& body, const char* name, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) throw bad_request(std::string("'") + name + "' must be an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(hi)) {
    throw bad_request(std::string("'") + name + "' must be at most " + std::to_string(hi) + ", got " + v->dump());
  }
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) {
    throw bad_request(std::string("'") + name + "' must be between " + std::to_string(lo) + " and " +
                      std::to_string(hi) + ", got " + v->dump());
  }
  return x;
}

std::optional<bool> boolean(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw bad_request(std::string("'") + name + "' must be a boolean");
  return v->get<bool>();
}

std::vector<std::string> stop_strings(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  if (v->is_string())
    return v->get<std::string>().empty() ? std::vector<std::string>{} : std::vector{v->get<std::string>()};
  if (!v->is_array()) throw bad_request("'stop' must be a string or a list of strings");
  std::vector<std::string> out;
  for (const json& s : *v) {
    if (!s.is_string()) throw bad_request("'stop' must be a string or a list of strings");
    if (!s.get<std::string>().empty()) out.push_back(s.get<std::string>());
  }
  return out;
}

void refuse_unsupported(const json& body, Endpoint endpoint) {
  if (endpoint == Endpoint::Completions) {
    if (field(body, "suffix")) throw bad_request("'suffix' is not supported");
    if (field(body, "tools") || field(body, "tool_choice")) throw bad_request("'tools' are only for chat completions");
  }
}

SamplingParams sampling(const json& body) {
  SamplingParams s;
  s.temperature = float(number(body, "temperature", 0.0, 2.0).value_or(1.0));
  s.top_p = float(number(body, "top_p", 0.0, 1.0).value_or(1.0));
  if (s.top_p <= 0.0f) throw bad_request("'top_p' must be above 0");
  const int64_t top_k = integer(body, "top_k", -1, INT32_MAX).value_or(0);
  s.top_k = top_k < 0 ? 0 : int32_t(top_k);  // vLLM's -1 and 0 both mean off
  s.min_p = float(number(body, "min_p", 0.0, 1.0).value_or(0.0));
  s.repetition_penalty = float(number(body, "repetition_penalty", 0.01, 100.0).value_or(1.0));
  s.presence_penalty = float(number(body, "presence_penalty", -2.0, 2.0).value_or(0.0));
  s.frequency_penalty = float(number(body, "frequency_penalty", -2.0, 2.0).value_or(0.0));
  s.min_tokens = int32_t(integer(body, "min_tokens", 0, INT32_MAX).value_or(0));
  const std::optional<int64_t> seed = integer(body, "seed", INT64_MIN, INT64_MAX);
  s.seed = seed ? uint64_t(*seed) : std::random_device{}();
  return s;
}

// `logit_bias`: {"token id": bias in [-100, 100]}, the ids as strings (JSON keys), as OpenAI's.
std::vector<std::pair<int32_t, float>> logit_bias(const json& body, const Engine& engine) {
  const json* v = field(body, "logit_bias");
  if (!v) return {};
  if (!v->is_object()) throw bad_request("'logit_bias' must be an object mapping token ids to biases");
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [key, bias] : v->items()) {
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id >= engine.vocab_size()) {
      throw bad_request("'logit_bias' key '" + key + "' is not a token id of the vocabulary (0.." +
                        std::to_string(engine.vocab_size() - 1) + ")");
    }
    if (!bias.is_number() || !std::isfinite(bias.get<double>()) || std::abs(bias.get<double>()) > 100.0) {
      throw bad_request("'logit_bias' values must be numbers between -100 and 100, got " + bias.dump() + " for '" +
                        key + "'");
    }
    out.emplace_back(int32_t(id), bias.get<float>());
  }
  return out;
}

// vLLM's `stop_token_ids`: more tokens that end the output.
std::vector<int32_t> stop_token_ids(const json& body, const Engine& engine) {
  const json* v = field(body, "stop_token_ids");
  if (!v) return {};
  if (!v->is_array()) throw bad_request("'stop_token_ids' must be a list of token ids");
  std::vector<int32_t> out;
  for (const json& id : *v) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= engine.vocab_size()) {
      throw bad_request("'stop_token_ids' holds " + id.dump() + ", not a token id of the vocabulary");
    }
    out.push_back(int32_t(id.get<int64_t>()));
  }
  return out;
}

// Choices one request may ask for (n, best_of).
constexpr int64_t kMaxChoices = 128;

// OpenAI's bound on top_logprobs, which completions' logprobs shares here (as vLLM).
constexpr int64_t kMaxLogprobs = 20;

// Request::logprobs: completions' `logprobs: k`; chat's `logprobs: true` with `top_logprobs: k`.
int32_t requested_logprobs(const json& body, Endpoint endpoint) {
  if (endpoint == Endpoint::Completions) return int32_t(integer(body, "logprobs", 0, kMaxLogprobs).value_or(-1));
  const std::optional<int64_t> top = integer(body, "top_logprobs", 0, kMaxLogprobs);
  if (!boolean(body, "logprobs").value_or(false)) {
    if (top) throw bad_request("'top_logprobs' needs 'logprobs': true");
    return -1;
  }
  return int32_t(top.value_or(0));
}

// Prompts one completions request may hold, times best_of: the engine requests it becomes.
constexpr size_t kMaxPromptRequests = 256;

// One prompt of a completion: a string or a list of token ids; `where` names it in errors.
std::vector<int32_t> one_prompt(const json& p, const Engine& engine, const std::string& where) {
  if (p.is_string()) {
    if (p.get<std::string>().empty()) throw bad_request(where + " is empty");
    return engine.tokenize(p.get<std::string>(), engine.add_bos(), false);
  }
  if (!p.is_array()) throw bad_request(where + " must be a string or a list of token ids");
  if (p.empty()) throw bad_request(where + " is empty");
  std::vector<int32_t> ids;
  for (const json& id : p) {
    if (!id.is_number_integer()) throw bad_request(where + " must be a string or a list of token ids");
    const int64_t x = id.get<int64_t>();
    if (x < 0 || x >= engine.vocab_size()) {
      throw bad_request(where + " token id " + id.dump() + " is outside the vocabulary (0.." +
                        std::to_string(engine.vocab_size() - 1) + ")");
    }
    ids.push_back(int32_t(x));
  }
  return ids;
}

// A completion's `prompt`: a string, a list of token ids, or a list of either (a batch: one
// choice per prompt, in order). Fills the prompts' ids and texts (an id prompt's text is its
// ids' text, for echo).
void completion_prompts(const json& body, const Engine& engine, ApiRequest& a) {
  const json* p = field(body, "prompt");
  if (!p) throw bad_request("'prompt' is required");
  const bool batch = p->is_array() && !p->empty() && ((*p)[0].is_string() || (*p)[0].is_array());
  if (!batch) {
    a.prompts.push_back(one_prompt(*p, engine, "'prompt'"));
    a.prompt_texts.push_back(p->is_string() ? p->get<std::string>() : engine.detokenize(a.prompts.back()));
    return;
  }
  for (size_t i = 0; i < p->size(); ++i) {
    const json& each = (*p)[i];
    if (!each.is_string() && !each.is_array()) {
      throw bad_request("'prompt' mixes prompts and token ids: give a list of strings or a list of token-id lists");
    }
    a.prompts.push_back(one_prompt(each, engine, "'prompt[" + std::to_string(i) + "]'"));
    a.prompt_texts.push_back(each.is_string() ? each.get<std::string>() : engine.detokenize(a.prompts.back()));
  }
}

// Structured output: OpenAI's `response_format` (json_object, json_schema) and llama-server's
// `grammar` (GBNF) and `json_schema` body fields, at most one of them.
void output_constraint(const json& body, Request& r) {
  int given = 0;
  if (const json* g = field(body, "grammar")) {
    if (!g->is_string()) throw bad_request("'grammar' must be a string in GBNF");
    r.grammar = g->get<std::string>();
    ++given;
  }
  if (const json* s = field(body, "json_schema")) {
    if (!s->is_object() && !s->is_boolean()) throw bad_request("'json_schema' must be a JSON Schema object");
    r.json_schema = s->dump();
    ++given;
  }
  if (const json* f = field(body, "response_format")) {
    if (!f->is_object() || !f->contains("type") || !(*f)["type"].is_string()) {
      throw bad_request("'response_format' must be an object with a string 'type'");
    }
    const std::string type = (*f)["type"].get<std::string>();
    if (type == "json_object") {
      r.grammar = grammar::any_json_gbnf();
      ++given;
    } else if (type == "json_schema") {
      const json* spec = field(*f, "json_schema");
      if (!spec || !spec->is_object())
        throw bad_request("'response_format.json_schema' must be an object with a 'schema'");
      const json* schema = field(*spec, "schema");
      if (!schema || (!schema->is_object() && !schema->is_boolean())) {
        throw bad_request("'response_format.json_schema.schema' must be a JSON Schema object");
      }
      r.json_schema = schema->dump();
      ++given;
    } else if (type != "text") {
      throw bad_request("'response_format.type' must be 'text', 'json_object' or 'json_schema', got '" + type + "'");
    }
  }
  if (given > 1) throw bad_request("give one of 'response_format', 'grammar' and 'json_schema'");
}

// The grammar of the calls a chat request's tools allow. Beside a response format (or
// llama-server's json_schema), "auto" lets the reply be calls or the formatted answer, and a
// required call ignores the format; a GBNF grammar cannot be joined to the calls.
void constrain_tool_calls(const chat::ToolRequest& tools, const Engine& engine, Request& r) {
  std::optional<std::string> answer_schema;
  if (!r.json_schema.empty()) {
    answer_schema = std::exchange(r.json_schema, {});
  } else if (r.grammar == grammar::any_json_gbnf()) {
    answer_schema = R"({"type": "object"})";  // json_object
  } else if (!r.grammar.empty()) {
    throw bad_request("'grammar' cannot be combined with 'tools'");
  }
  // One control token of the vocabulary: one token with parse_special, several as text.
  auto is_control_token = [&](std::string_view text) {
    const std::string t(text);
    return engine.tokenize(t, false, true).size() == 1 && engine.tokenize(t, false, false).size() > 1;
  };
  try {
    const chat::ToolGrammar g = chat::tool_request_grammar(tools, is_control_token, answer_schema);
    r.grammar = g.gbnf;
    r.grammar_triggers = g.triggers;
  } catch (const Error& e) {
    throw bad_request(std::string("'tools': ") + e.what());
  }
}

}  // namespace

ServedModel served_model(const json& body, const ModelNames& names) {
  ServedModel served;
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) throw bad_request("'model' must be a string");
    served.name = m->get<std::string>();
  }
  const std::optional<std::string> adapter = names.adapter_for(served.name);
  if (!adapter)
    throw ApiError(404, "The model '" + served.name + "' does not exist.", "invalid_request_error", "model_not_found");
  if (served.name.empty()) served.name = names.base();
  served.adapter = *adapter;
  return served;
}

ApiRequest parse_api_request(Endpoint endpoint, const std::string& text, const Engine& engine, const ModelNames& names,
                             bool special_in_content) {
  return parse_api_request(endpoint, parse_request_body(text), engine, names, special_in_content);
}

ApiRequest parse_api_request(Endpoint endpoint, const json& body, const Engine& engine, const ModelNames& names,
                             bool special_in_content) {
  if (!body.is_object()) throw bad_request("the body must be a JSON object");

  ApiRequest a;
  a.endpoint = endpoint;
  ServedModel served = served_model(body, names);
  a.model = std::move(served.name);
  a.request.adapter = std::move(served.adapter);

  refuse_unsupported(body, endpoint);
  a.stream = boolean(body, "stream").value_or(false);
  if (const json* options = field(body, "stream_options")) {
    if (!options->is_object()) throw bad_request("'stream_options' must be an object");
    a.include_usage = boolean(*options, "include_usage").value_or(false);
  }
  Request& r = a.request;
  r.sampling = sampling(body);
  r.sampling.logit_bias = logit_bias(body, engine);
  r.stop_strings = stop_strings(body);
  a.stop = r.stop_strings;
  r.ignore_eos = boolean(body, "ignore_eos").value_or(false);
  r.logprobs = requested_logprobs(body, endpoint);
  output_constraint(body, r);
  a.n = int32_t(integer(body, "n", 1, kMaxChoices).value_or(1));
  if (endpoint == Endpoint::Completions) {
    a.best_of = int32_t(integer(body, "best_of", 1, kMaxChoices).value_or(a.n));
    if (a.best_of < a.n) throw bad_request("'best_of' must be at least 'n'");
    if (a.best_of > a.n && a.stream) throw bad_request("'best_of' above 'n' cannot be streamed");
    a.echo = boolean(body, "echo").value_or(false);
  } else {
    a.best_of = a.n;
  }
  if (a.echo) {
    // lm-evaluation-harness's loglikelihood: echo + logprobs + max_tokens 0.
    if (a.stream && r.logprobs >= 0) throw bad_request("'echo' with 'logprobs' cannot be streamed");
    r.prompt_logprobs = r.logprobs;
  }

  try {
    if (endpoint == Endpoint::Completions) {
      completion_prompts(body, engine, a);
      if (a.prompts.size() * size_t(a.best_of) > kMaxPromptRequests) {
        throw bad_request("'prompt' holds " + std::to_string(a.prompts.size()) + " prompts: with best_of " +
                          std::to_string(a.best_of) + " that is over " + std::to_string(kMaxPromptRequests) +
                          " completions in one request");
      }
      r.prompt_ids = a.prompts[0];
    } else {
      const ChatFormat format = engine.chat_format();
      const json* messages_json = field(body, "messages");
      if (!messages_json) throw bad_request("'messages' is required");
      chat::ChatImages images;
      std::vector<ChatMessage> messages =
          chat::parse_messages(*messages_json, engine.takes_images() ? &images : nullptr);
      const std::optional<std::string> chat_template = engine.chat_template();
      const std::optional<chat::ToolRequest> tools = chat::parse_tool_request(body, chat_template);
      ChatTemplateOptions options;
      options.kwargs = chat::template_kwargs(body);
      options.special_in_content = special_in_content;
      if (tools) chat::offer_tools(*tools, messages, options);
      const ChatPrompt prompt = engine.render_chat(messages, options);
      std::vector<int32_t> image_positions;
      r.prompt_ids =
          engine.tokenize(prompt, engine.add_bos(), images.images.empty() ? "" : images.marker, image_positions);
      if (image_positions.size() != images.images.size()) {
        throw Error("the chat template placed " + std::to_string(image_positions.size()) + " of the " +
                    std::to_string(images.images.size()) + " images in the prompt");
      }
      for (size_t i = 0; i < images.images.size(); ++i)
        r.images.push_back({std::move(images.images[i]), image_positions[i]});
      if (tools) constrain_tool_calls(*tools, engine, r);
      a.reply = chat::reply_shape(chat_template, prompt.text, tools);
      r.stop_token_ids = format.stop_token_ids;
      r.stop_strings.insert(r.stop_strings.end(), format.stop_strings.begin(), format.stop_strings.end());
    }
    const std::vector<int32_t> more_stops = stop_token_ids(body, engine);
    r.stop_token_ids.insert(r.stop_token_ids.end(), more_stops.begin(), more_stops.end());
  } catch (const Error& e) {
    throw bad_request(e.what());
  }
  if (r.prompt_ids.empty()) throw bad_request("the prompt is empty");
  if (a.prompts.empty()) a.prompts.push_back(r.prompt_ids);

  const int64_t context = engine.context_length();
  int64_t prompt = 0;  // the longest prompt's length: every prompt must leave room for the output
  for (const std::vector<int32_t>& ids : a.prompts) prompt = std::max(prompt, int64_t(ids.size()));
  const int64_t least = a.echo ? 0 : 1;  // an echoed prompt may be all that is wanted
  std::optional<int64_t> max_tokens = integer(body, "max_completion_tokens", least, INT32_MAX);
  if (!max_tokens) max_tokens = integer(body, "max_tokens", least, INT32_MAX);
  // OpenAI's default for a completion is 16 tokens; a chat reply may fill the context.
  const int64_t wanted =
      max_tokens.value_or(endpoint == Endpoint::Completions ? 16 : std::max<int64_t>(1, context - prompt));
  if (prompt + wanted > context) {
    throw bad_request("This model's maximum context length is " + std::to_string(context) +
                      " tokens. However, you requested " + std::to_string(prompt + wanted) + " tokens (" +
                      std::to_string(prompt) + " in the prompt, " + std::to_string(wanted) +
                      " in the completion). Please reduce the length of the prompt or completion.");
  }
  r.max_new_tokens = int32_t(wanted);
  return a;
}

}  // namespace pagoda::server
