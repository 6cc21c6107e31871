#include "bench/pagoda_bench/run_test.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "bench/pagoda_bench/engine_setup.h"
#include "bench/pagoda_bench/job.h"
#include "pagoda/error.h"

namespace pagoda::benchtool {

std::vector<int32_t> RandomTokens::next(int n) {
  std::vector<int32_t> out(size_t(std::max(n, 0)));
  for (int32_t& id : out) id = ids_(rng_);
  return out;
}

namespace {

std::string utc_now() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%FT%TZ", std::gmtime(&t));
  return buf;
}

// One run's prompts: each sequence's context, then fresh tokens.
std::vector<std::vector<int32_t>> prompts(const TestSpec& spec, const std::vector<std::vector<int32_t>>& contexts,
                                          RandomTokens& tokens) {
  std::vector<std::vector<int32_t>> out(size_t(spec.n_seqs));
  for (size_t i = 0; i < out.size(); ++i) {
    if (!contexts.empty()) out[i] = contexts[i];
    const std::vector<int32_t> fresh = tokens.next(spec.fresh_prompt());
    out[i].insert(out[i].end(), fresh.begin(), fresh.end());
  }
  return out;
}

// Context tokens of each sequence the prefix cache can give: its full pages, short of the
// prompt's last token, which is always computed for its logits.
int cached_context(const TestSpec& spec) {
  const int full_pages = std::min(spec.n_depth, spec.n_depth + spec.fresh_prompt() - 1) / kTokensPerPage;
  return full_pages * kTokensPerPage;
}

// A prompt's time counts only its own tokens (and the context the cache cannot give) when the
// cache gave each sequence exactly what it can.
void check_prefix_hits(const TestSpec& spec, const JobTimes& job) {
  if (spec.kind == TestKind::Generation) return;
  const int64_t expected = int64_t(spec.n_seqs) * cached_context(spec);
  if (job.prefix_hit_tokens == expected) return;
  throw Error(spec.name() + ": the prefix cache gave " + std::to_string(job.prefix_hit_tokens) +
              " prompt tokens, not the " + std::to_string(expected) +
              " of the context it holds, so the timing would not be of " + std::to_string(spec.n_prompt) +
              " prompt tokens");
}

// Decode tokens (every token after a request's first) that came after `after_s`.
int64_t tokens_after(const JobTimes& job, double after_s) {
  int64_t n = 0;
  for (const auto& stamps : job.tokens)
    for (size_t i = 1; i < stamps.size(); ++i)
      n += std::chrono::duration<double>(stamps[i] - job.start).count() > after_s;
  return n;
}

// A -B job as llama-batched-bench reports it: the prefill phase ends with the last request's
// first token, and its S_TG counts the decode tokens made after that.
void add_batched_sample(const TestSpec& spec, const JobTimes& job, TestResult& r) {
  double pp_s = 0.0, end_s = 0.0;
  for (size_t i = 0; i < job.tokens.size(); ++i) {
    pp_s = std::max(pp_s, job.first_token_s(i));
    end_s = std::max(end_s, job.last_token_s(i));
  }
  r.samples_ns.push_back(uint64_t(std::llround(end_s * 1e9)));
  r.samples_ts.push_back(double(spec.n_seqs) * (spec.n_prompt + spec.n_gen) / end_s);
  r.samples_s_pp.push_back(spec.n_prompt > 0 ? double(spec.n_seqs) * spec.n_prompt / pp_s : 0.0);
  r.samples_s_tg.push_back(spec.n_gen > 0 ? double(tokens_after(job, pp_s)) / (end_s - pp_s) : 0.0);
}

void add_sample(const TestSpec& spec, const JobTimes& job, TestResult& r) {
  if (spec.kind == TestKind::Batched) return add_batched_sample(spec, job, r);
  // pp: submit to the first token. tg: the first token (the prefill's) to the last.
  const bool prompt = spec.kind == TestKind::Prompt;
  const double s = prompt ? job.first_token_s(0) : job.last_token_s(0) - job.first_token_s(0);
  r.samples_ns.push_back(uint64_t(std::llround(s * 1e9)));
  r.samples_ts.push_back((prompt ? spec.n_prompt : spec.n_gen) / s);
}

void warn_uncached_context(const TestSpec& spec) {
  const int rest = spec.n_depth - cached_context(spec);
  if (spec.kind == TestKind::Generation || rest == 0) return;
  std::fprintf(stderr,
               "pagoda-bench: %s: the context's last %d tokens are not in full KV pages the prefix cache "
               "can give (it keeps full pages, and the prompt's last token is always computed); they are "
               "prefilled again in the timed runs\n",
               spec.name().c_str(), rest);
}

}  // namespace

TestResult run_test(Engine& engine, const TestSpec& spec, int reps, RandomTokens& tokens, const Say& say,
                    const SampleBandwidth& sample_bandwidth) {
  TestResult r{spec, utc_now()};
  warn_uncached_context(spec);
  std::vector<std::vector<int32_t>> contexts;
  if (spec.n_depth > 0) {
    say("depth run");
    for (int i = 0; i < spec.n_seqs; ++i) contexts.push_back(tokens.next(spec.n_depth));
    run_job(engine, contexts, 1);  // leaves the contexts' full pages in the prefix cache
  }
  const int32_t max_new = spec.max_new_tokens();
  say("warmup run");
  check_prefix_hits(spec, run_job(engine, prompts(spec, contexts, tokens), max_new));
  r.read_bytes_per_s = sample_bandwidth();
  for (int i = 1; i <= reps; ++i) {
    say("run " + std::to_string(i) + "/" + std::to_string(reps));
    const JobTimes job = run_job(engine, prompts(spec, contexts, tokens), max_new);
    check_prefix_hits(spec, job);
    add_sample(spec, job, r);
    r.read_bytes_per_s = std::max(r.read_bytes_per_s, sample_bandwidth());
  }
  return r;
}

}  // namespace pagoda::benchtool
