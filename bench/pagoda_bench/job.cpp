#include "bench/pagoda_bench/job.h"

#include <thread>

#include "pagoda/error.h"

namespace pagoda::benchtool {

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

Request greedy(const std::vector<int32_t>& prompt, int32_t max_new_tokens, std::vector<Clock::time_point>& stamps) {
  Request r;
  r.prompt_ids = prompt;
  r.max_new_tokens = max_new_tokens;
  r.sampling.temperature = 0.0f;
  r.ignore_eos = true;
  stamps.reserve(size_t(max_new_tokens));
  // On the scheduler thread, right after the step that made the token: keep it to a stamp.
  r.on_token = [&stamps](const StreamEvent& e) {
    if (e.token >= 0) stamps.push_back(Clock::now());
  };
  return r;
}

// Waits until the pool holds no page for any request: the finished requests' pages are back
// (their full pages named in the prefix cache), which the next job's admission relies on.
void wait_idle(const Engine& engine) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  for (;;) {
    const EngineMetrics m = engine.metrics();
    if (m.running == 0 && m.queued == 0 && m.kv_pages_used == 0) return;
    if (Clock::now() > deadline) throw Error("the engine did not return its KV pages within 30 s of a job");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// The handles of a job's requests. When a job is abandoned by an error, the requests still
// running are cancelled and waited for, so no callback stamps into a vector that is gone.
struct Handles {
  std::vector<RequestHandle> list;
  ~Handles() {
    for (RequestHandle& h : list) {
      if (!h.future().valid()) continue;
      h.cancel();
      h.future().wait();
    }
  }
};

}  // namespace

double JobTimes::first_token_s(size_t request) const { return seconds(tokens[request].front() - start); }
double JobTimes::last_token_s(size_t request) const { return seconds(tokens[request].back() - start); }

JobTimes run_job(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, int32_t max_new_tokens) {
  JobTimes job;
  job.tokens.resize(prompts.size());
  Handles handles;
  handles.list.reserve(prompts.size());
  const int64_t hits_before = engine.metrics().prefix_hit_tokens;
  job.start = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i)
    handles.list.push_back(engine.submit(greedy(prompts[i], max_new_tokens, job.tokens[i])));
  for (size_t i = 0; i < handles.list.size(); ++i) {
    const Completion c = handles.list[i].get();
    if (c.finish_reason == FinishReason::Error) throw Error("a request failed: " + c.error);
    if (job.tokens[i].size() != size_t(max_new_tokens)) {
      throw Error("a request stopped after " + std::to_string(job.tokens[i].size()) + " of " +
                  std::to_string(max_new_tokens) + " tokens (" + finish_reason_name(c.finish_reason) + ")");
    }
  }
  wait_idle(engine);
  job.prefix_hit_tokens = engine.metrics().prefix_hit_tokens - hits_before;
  return job;
}

}  // namespace pagoda::benchtool
