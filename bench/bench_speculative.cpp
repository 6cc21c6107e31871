// Single-stream speed of speculative decoding against plain decoding, on one model:
//
//   bench_speculative MODEL [--task retell|repeat|novel] [--gaps N] [--tokens N] [--reps N] [--threads N]
//                     [--draft-max N] [--draft MODEL] [--draft-p-min P] [--draft-probe N]
//
// retell: the model's own greedy story, then its opening again (an input-grounded task: the
//   model retells what it was given); with --gaps N the story in the prompt misses every N-th
//   token, which the model puts back as it retells (an edit: guesses fail at each gap); repeat: a random run of tokens
//   repeated four times (a random model copies little, but its greedy output falls into loops the proposer finds);
//   novel: random tokens, nothing repeated (the cost when guesses are mostly rejected).
// With --draft, a draft model (same vocabulary) guesses instead of the n-gram proposer: the
// model itself for the upper bound, or a smaller quantization of it.
// Prints decode tokens/s (the tokens after the first, over the time between them, so the
// prompt's prefill is left out) of the best runs, the speed-up, the median of the speed-ups of
// runs side by side, the acceptance, and whether the outputs agree
// (they must: a difference exits with status 1), and the load average at the end.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "pagoda/engine.h"
#include "pagoda/error.h"

namespace {

struct Run {
  std::vector<int32_t> tokens;
  double decode_tokens_per_s = 0.0;
};

Run generate(pagoda::Engine& engine, const std::vector<int32_t>& prompt, int32_t n,
             const pagoda::SpeculativeParams& spec) {
  pagoda::Request r;
  r.prompt_ids = prompt;
  r.max_new_tokens = n;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  r.speculative = spec;
  r.prefix_cache = false;  // every repetition prefills alike
  const pagoda::Completion c = engine.submit(r).get();
  return {c.token_ids, c.time_per_output_token_s > 0.0 ? 1.0 / c.time_per_output_token_s : 0.0};
}

std::vector<int32_t> prompt_for(pagoda::Engine& engine, const std::string& task, int32_t n, int32_t gaps) {
  const int32_t vocab = engine.vocab_size();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> token(3, vocab - 1);
  std::vector<int32_t> prompt;
  if (task == "retell") {
    const std::vector<int32_t> opening = engine.tokenize("Once upon a time", engine.add_bos());
    const int32_t told = std::min(2 * n, engine.context_length() / 2 - int32_t(opening.size()));
    const Run story = generate(engine, opening, told, {});
    prompt = opening;
    for (size_t i = 0; i < story.tokens.size(); ++i)
      if (gaps <= 0 || (i + 1) % size_t(gaps) != 0) prompt.push_back(story.tokens[i]);
    const std::vector<int32_t> again = engine.tokenize(" Once upon a time", false);
    prompt.insert(prompt.end(), again.begin(), again.end());
  } else if (task == "repeat") {
    std::vector<int32_t> run(64);
    for (int32_t& t : run) t = token(rng);
    for (int rep = 0; rep < 4; ++rep) prompt.insert(prompt.end(), run.begin(), run.end());
  } else if (task == "novel") {
    prompt.resize(256);
    for (int32_t& t : prompt) t = token(rng);
  } else {
    throw pagoda::Error("--task must be retell, repeat or novel, got " + task);
  }
  return prompt;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2)
      throw pagoda::Error(
          "usage: bench_speculative MODEL [--task retell|repeat|novel] [--gaps N] [--tokens N] [--reps N] [--threads "
          "N] [--draft-max N] [--draft MODEL] [--draft-p-min P] [--draft-probe N]");
    std::string task = "retell";
    std::string draft;
    int32_t n = 128, reps = 3, threads = 0, draft_max = 8, gaps = 0;
    float draft_p_min = 0.0f;
    int32_t draft_probe = pagoda::SpeculativeParams{}.draft_probe;
    for (int i = 2; i + 1 < argc; i += 2) {
      const std::string flag = argv[i], value = argv[i + 1];
      if (flag == "--task") task = value;
      else if (flag == "--tokens") n = std::stoi(value);
      else if (flag == "--gaps") gaps = std::stoi(value);
      else if (flag == "--reps") reps = std::stoi(value);
      else if (flag == "--threads") threads = std::stoi(value);
      else if (flag == "--draft-max") draft_max = std::stoi(value);
      else if (flag == "--draft") draft = value;
      else if (flag == "--draft-p-min") draft_p_min = std::stof(value);
      else if (flag == "--draft-probe") draft_probe = std::stoi(value);
      else throw pagoda::Error("unknown argument " + flag);
    }
    pagoda::Engine engine({.model_path = argv[1], .threads = threads, .draft_model_path = draft});
    const std::vector<int32_t> prompt = prompt_for(engine, task, n, gaps);
    n = std::min(n, engine.context_length() - int32_t(prompt.size()));
    pagoda::SpeculativeParams spec;
    spec.mode = draft.empty() ? pagoda::SpeculativeMode::Ngram : pagoda::SpeculativeMode::Draft;
    spec.draft_max = draft_max;
    spec.draft_p_min = draft_p_min;
    spec.draft_probe = draft_probe;

    // Alternating, best of `reps` each, and the ratio of each pair of runs side by side (which
    // goes first alternates too): the machine's speed drifts by more than a few percent between
    // minutes, so small costs show in the paired ratios' median rather than in the best runs.
    double plain_best = 0.0, spec_best = 0.0;
    std::vector<double> ratios;
    const pagoda::EngineMetrics before = engine.metrics();
    bool same = true;
    for (int rep = 0; rep < reps; ++rep) {
      Run plain, speculated;
      if (rep % 2 == 0) {
        plain = generate(engine, prompt, n, {});
        speculated = generate(engine, prompt, n, spec);
      } else {
        speculated = generate(engine, prompt, n, spec);
        plain = generate(engine, prompt, n, {});
      }
      same = same && plain.tokens == speculated.tokens;
      plain_best = std::max(plain_best, plain.decode_tokens_per_s);
      spec_best = std::max(spec_best, speculated.decode_tokens_per_s);
      if (plain.decode_tokens_per_s > 0.0) ratios.push_back(speculated.decode_tokens_per_s / plain.decode_tokens_per_s);
    }
    std::sort(ratios.begin(), ratios.end());
    const pagoda::EngineMetrics after = engine.metrics();
    const int64_t proposed = after.speculative_proposed - before.speculative_proposed;
    const int64_t accepted = after.speculative_accepted - before.speculative_accepted;
    if (gaps > 0) std::printf("every %d-th token of the story left out of the prompt\n", gaps);
    std::printf("task %s, prompt %zu tokens, %d new, draft-max %d, %d threads%s%s\n", task.c_str(), prompt.size(), n,
                draft_max, threads, draft.empty() ? "" : ", draft ", draft.c_str());
    if (!draft.empty()) std::printf("draft-probe %d\n", draft_probe);
    std::printf("plain   %8.1f tok/s\n%-7s %8.1f tok/s   speed-up %.2fx\n", plain_best,
                pagoda::speculative_mode_name(spec.mode), spec_best, plain_best > 0.0 ? spec_best / plain_best : 0.0);
    if (!ratios.empty()) {
      const size_t m = ratios.size();
      const double median = m % 2 ? ratios[m / 2] : 0.5 * (ratios[m / 2 - 1] + ratios[m / 2]);
      std::printf("paired   speed-up median %.3fx (%.3f .. %.3f over %zu pairs)\n", median, ratios.front(),
                  ratios.back(), m);
    }
    std::printf("guesses %lld, accepted %lld (%.1f%%), %.2f guesses per token\n", (long long)proposed,
                (long long)accepted, proposed > 0 ? 100.0 * double(accepted) / double(proposed) : 0.0,
                double(proposed) / double(reps * n));
    std::printf("outputs %s\n", same ? "identical" : "DIFFER");
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) == 3) std::printf("load average %.2f %.2f %.2f\n", load[0], load[1], load[2]);
    return same ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_speculative: %s\n", e.what());
    return 2;
  }
}
