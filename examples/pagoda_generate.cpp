// pagoda-generate: runs one prompt or a JSONL file of prompts and prints one JSON object a
// prompt: the prompt ids, the generated ids and their text.
//   pagoda-generate -m model.gguf --prompt "Once upon a time" --temp 0
//   pagoda-generate -m model.gguf --prompts prompts.jsonl --temp 0 --stop-id 1

#include <array>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "examples/common/args.h"
#include "examples/common/cache_type_flag.h"
#include "examples/common/lora_flag.h"
#include "examples/common/resource_usage.h"
#include "examples/common/speculative_flags.h"
#include "examples/common/grammar_flags.h"
#include "examples/common/kv_tier_flags.h"
#include "examples/common/sampling_flags.h"
#include "pagoda/engine.h"

namespace {

constexpr const char* kUsage = R"(usage: pagoda-generate -m MODEL (--prompt TEXT | --prompts FILE.jsonl) [options]
  -m, --model PATH        GGUF file, or llama2.c checkpoint (.bin)
  --tokenizer PATH        llama2.c tokenizer.bin (default: tokenizer.bin beside the checkpoint)
  --prompt TEXT           one prompt
  --special               control tokens written in the prompts ("<|im_start|>") become their
                          ids, as llama-cli reads a prompt (default: they are ordinary text)
  --prompts FILE          JSON lines with a "prompt" field; optional per-line "max_tokens" and
                          "max_positions" (llama2.c's steps: prompt + generated positions)
  -n, --max-tokens N      new tokens at most (default: up to the context length)
  --max-positions N       stop when prompt + generated positions reach N
  --temp X                temperature, 0 = greedy (default 1.0)
  --top-k N  --top-p X  --min-p X  --repeat-penalty X  --repeat-last-n N  --seed N
  --presence-penalty X  --frequency-penalty X   OpenAI's penalties over the generated tokens
  --logit-bias ID+X|ID-X  add X to token ID's logit (repeatable; -100 bans it)
  --min-tokens N          no end-of-generation or stop token before N tokens
  --stop-id ID            also stop on this token id (repeatable); EOS always stops. The
                          stop token ends generated_ids; the text leaves it out
  -t, --threads N         compute threads (default: all cores)
  --cache-type T          KV cache type: f32, f16 (default), bf16 or q8_0
  --no-mmap               read the model into memory instead of mapping it (llama.cpp's
                          flag): costs its size in RSS, and the file may then change freely
  --lora NAME=PATH[:SCALE]  load a LoRA adapter (GGUF) under NAME (repeatable)
  --adapter NAME          run the prompts on this adapter (a JSONL line's "adapter" field
                          overrides it; default: the base model)
  --mmproj F              the model's vision projector (llama.cpp's mmproj GGUF), for --image
  --image F               an image (PNG, JPEG or WebP) for every prompt (repeatable): each goes
                          where the prompt says <__image__>, in order, or all before a prompt
                          that says it nowhere
)";

struct Job {
  std::string prompt;
  int64_t max_tokens;
  int64_t max_positions;
  std::string adapter;
};

std::vector<Job> read_jobs(const pagoda::cli::Args& args, int64_t max_tokens, int64_t max_positions) {
  std::vector<Job> jobs;
  const std::string adapter = args.get("--adapter", "");
  if (auto prompt = args.get("--prompt")) jobs.push_back({*prompt, max_tokens, max_positions, adapter});
  if (auto file = args.get("--prompts")) {
    std::ifstream in(*file);
    if (!in) throw pagoda::Error(*file + ": cannot open");
    std::string line;
    for (int line_no = 1; std::getline(in, line); ++line_no) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      auto fail = [&](const std::string& what) {
        throw pagoda::Error(*file + ":" + std::to_string(line_no) + ": " + what);
      };
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) fail("not a JSON object");
      if (!j.contains("prompt") || !j["prompt"].is_string()) fail("no \"prompt\" string");
      Job job{j["prompt"].get<std::string>(), max_tokens, max_positions, adapter};
      if (j.contains("adapter")) job.adapter = j["adapter"].get<std::string>();
      if (j.contains("max_tokens")) job.max_tokens = j["max_tokens"].get<int64_t>();
      if (j.contains("max_positions")) job.max_positions = j["max_positions"].get<int64_t>();
      jobs.push_back(std::move(job));
    }
  }
  if (jobs.empty()) throw pagoda::Error("give --prompt TEXT or --prompts FILE (see --help)");
  return jobs;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::array kOwnFlags{"--model",         "--tokenizer", "--prompt",  "--prompts", "--max-tokens",
                               "--max-positions", "--seed",      "--stop-id", "--threads", "--cache-type",
                               "--lora",          "--adapter",   "--mmproj",  "--image"};
    pagoda::cli::Args args(
        argc, argv,
        pagoda::cli::flag_set({kOwnFlags, pagoda::cli::kSamplingFlags, pagoda::cli::kSpeculativeFlags,
                               pagoda::cli::kGrammarFlags, pagoda::cli::kKvTierFlags}),
        {"--help", "--no-mmap", "--spec-ngram", "--special"}, {{"-n", "--max-tokens"}});
    if (args.has("--help")) {
      std::cout << kUsage << pagoda::cli::kGrammarUsage << pagoda::cli::kSpeculativeUsage << pagoda::cli::kKvTierUsage;
      return 0;
    }
    auto model_path = args.get("--model");
    if (!model_path) throw pagoda::Error("-m MODEL is required (see --help)");

    pagoda::SamplingParams sampling = pagoda::cli::sampling_from_flags(args, {});
    sampling.seed = args.number<uint64_t>("--seed", 0);

    const auto jobs = read_jobs(args, args.number<int64_t>("--max-tokens", INT64_MAX),
                                args.number<int64_t>("--max-positions", INT64_MAX));
    std::vector<int32_t> stop_ids;
    for (const std::string& id : args.all("--stop-id"))
      stop_ids.push_back(pagoda::cli::Args::parse<int32_t>("--stop-id", id));

    const pagoda::cli::LoadTimer load_timer;
    pagoda::EngineConfig config{.model_path = *model_path,
                                .tokenizer_path = args.get("--tokenizer", ""),
                                .use_mmap = !args.has("--no-mmap"),
                                .threads = args.number("--threads", 0),
                                .kv_cache_type = pagoda::cli::cache_type_flag(args),
                                .speculative = pagoda::cli::speculative_from_flags(args),
                                .draft_model_path = pagoda::cli::draft_model_from_flags(args)};
    config.mmproj_path = args.get("--mmproj", "");
    pagoda::cli::kv_tier_flags(args).apply(config);
    std::vector<pagoda::RequestImage> images;
    for (const std::string& file : args.all("--image")) {
      std::ifstream in(file, std::ios::binary);
      if (!in) throw pagoda::Error(file + ": cannot open");
      images.push_back({std::string(std::istreambuf_iterator<char>(in), {}), -1});
    }
    pagoda::Engine engine(config);
    load_timer.report(stderr, "pagoda-generate: ", "loaded the model");
    for (const std::string& text : args.all("--lora")) {
      const pagoda::cli::LoraFlag lora = pagoda::cli::parse_lora(text);
      engine.load_adapter(lora.name, lora.path, lora.scale);
    }
    // Every prompt is submitted at once and runs in the same continuous batch.
    std::vector<pagoda::RequestHandle> handles;
    std::vector<std::vector<int32_t>> prompts;
    const bool special = args.has("--special");
    for (const Job& job : jobs) {
      pagoda::Request r;
      if (images.empty()) {
        r.prompt_ids = engine.tokenize(job.prompt, engine.add_bos(), special);
      } else {
        r.parse_special = special;
        // The engine lays the images out; the positions they take count against the context.
        r.prompt = job.prompt;
        if (r.prompt.find(r.image_marker) == std::string::npos) {
          for (size_t k = 0; k < images.size(); ++k) r.prompt.insert(0, r.image_marker);
        }
        r.images = images;
      }
      // llama2.c's positions: the last generated token is never fed, so it may sit at the limit.
      const int64_t by_positions =
          job.max_positions == INT64_MAX ? INT64_MAX : job.max_positions - int64_t(r.prompt_ids.size()) + 1;
      // With images the prompt's length is the engine's to know: -n bounds the reply, else 256.
      const int64_t room = images.empty() ? engine.context_length() - int64_t(r.prompt_ids.size())
                                          : (job.max_tokens == INT64_MAX ? 256 : job.max_tokens);
      r.max_new_tokens = int32_t(std::min({job.max_tokens, by_positions, room}));
      r.sampling = sampling;
      r.stop_token_ids = stop_ids;
      r.adapter = job.adapter;
      pagoda::cli::constraint_from_flags(args, r);
      prompts.push_back(r.prompt_ids);
      handles.push_back(engine.submit(std::move(r)));
    }
    for (size_t i = 0; i < jobs.size(); ++i) {
      const pagoda::Completion c = handles[i].get();
      if (c.finish_reason == pagoda::FinishReason::Error) throw pagoda::Error(c.error);
      nlohmann::json out;
      out["prompt"] = jobs[i].prompt;
      if (images.empty()) out["prompt_ids"] = prompts[i];
      else out["images"] = images.size();
      out["generated_ids"] = c.token_ids;
      out["text"] = c.text;
      out["finish_reason"] = pagoda::finish_reason_name(c.finish_reason);
      if (!jobs[i].adapter.empty()) out["adapter"] = jobs[i].adapter;
      std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pagoda-generate: %s\n", e.what());
    return 1;
  }
}
