#include "engine/scheduling/step_planner.h"

#include <algorithm>
#include <cassert>

namespace pagoda::scheduling {
namespace {

int32_t pages_for(const SequenceView& s, int32_t n_tokens) {
  return s.table->pages_needed(s.n_cached, s.n_cached + n_tokens);
}

// The images not yet encoded that a chunk of `n` tokens feeds first: their cost, and where the
// first of them starts (past the chunk when none).
struct Encoding {
  int64_t cost = 0;
  int32_t first = 0;
};
Encoding encoding(const SequenceView& s, int32_t n) {
  Encoding e{0, s.n_cached + n};
  for (const SequenceImage& image : s.images) {
    if (image.rows || image.position + image.tokens <= s.n_cached || image.position >= s.n_cached + n) continue;
    e.cost += image.cost_tokens;
    e.first = std::min(e.first, std::max(image.position, s.n_cached));
  }
  return e;
}

// `n`, the tokens of `s` a chunk would take, changed so that the chunk holds no part of an image
// whose rows attend both ways without the rest (all its keys must be cached before any of its
// queries attends): a chunk that would end inside one ends before it instead; one that starts
// with it takes it whole when it is the step's first chunk — which always runs, past the budget
// if it must, or an image larger than the budget could never run — and otherwise takes nothing
// (0) and waits for a step it comes first in.
int32_t whole_images(const SequenceView& s, int32_t n, bool first_chunk) {
  const int32_t end = s.n_cached + n;
  for (const SequenceImage& image : s.images) {
    const int32_t image_end = image.position + image.tokens;
    if (!image.bidirectional || image.position >= end || image_end <= end) continue;
    if (image.position > s.n_cached) return image.position - s.n_cached;
    return first_chunk ? image_end - s.n_cached : 0;
  }
  return n;
}

}  // namespace

bool StepPlan::speculates() const {
  return std::any_of(entries.begin(), entries.begin() + ptrdiff_t(decodes),
                     [](const PlannedEntry& e) { return e.guesses > 0; });
}

StepPlanner::StepPlanner(const EngineConfig& config)
    : max_tokens_(config.max_tokens_per_step),
      max_entries_(config.max_entries_per_step),
      prefill_chunk_(config.prefill_chunk),
      speculative_max_batch_(config.speculative_max_batch),
      mixed_adapter_batches_(config.mixed_adapter_batches) {}

void StepPlanner::plan_entries(std::span<const SequenceView> running, size_t turn, bool speculate,
                               StepPlan& plan) const {
  assert(!running.empty());
  plan.entries.clear();
  int32_t budget = max_tokens_;
  int32_t pages = 0;
  const LoraWeights* only = mixed_adapter_batches_ ? nullptr : running[turn % running.size()].adapter;
  auto excluded = [&](const SequenceView& s) { return !mixed_adapter_batches_ && s.adapter != only; };
  auto full = [&] { return int32_t(plan.entries.size()) == max_entries_ || budget == 0; };
  for (size_t i = 0; i < running.size(); ++i) {
    if (running[i].status != SequenceStatus::Decoding || excluded(running[i])) continue;
    if (full()) break;
    plan.entries.push_back({i, 1, 0, pages_for(running[i], 1)});
    pages += plan.entries.back().pages;
    --budget;
  }
  plan.decodes = plan.entries.size();
  for (size_t i = 0; i < running.size(); ++i) {
    if (running[i].status != SequenceStatus::Prefilling || excluded(running[i])) continue;
    if (full()) break;
    const bool first_chunk = plan.entries.size() == plan.decodes;
    int32_t n = whole_images(running[i], std::min({running[i].pending, prefill_chunk_, budget}), first_chunk);
    if (n == 0) continue;
    const Encoding images = encoding(running[i], n);
    if (images.cost > 0 && n + images.cost > budget && !first_chunk) {
      n = images.first - running[i].n_cached;  // stop before the image, or wait for a step with room
      if (n == 0) continue;
      budget -= n;
    } else {
      budget -= int32_t(std::min<int64_t>(budget, n + images.cost));
    }
    plan.entries.push_back({i, n, 0, pages_for(running[i], n)});
    pages += plan.entries.back().pages;
  }
  plan.pages = pages;
  // Speculation is a latency tool: in a full batch it would only add compute.
  plan.guess_budget = speculate && int32_t(plan.decodes) <= speculative_max_batch_ ? budget : 0;
}

void StepPlanner::set_guesses(std::span<const SequenceView> running, StepPlan& plan, size_t entry, int32_t guesses) {
  assert(entry < plan.decodes);
  PlannedEntry& e = plan.entries[entry];
  plan.pages -= e.pages;
  e.guesses = guesses;
  e.n_tokens = 1 + guesses;
  e.pages = pages_for(running[e.sequence], e.n_tokens);
  plan.pages += e.pages;
}

Relief StepPlanner::make_room(const StepPlan& plan, size_t n_running) {
  assert(n_running > 0);
  if (plan.speculates()) return {true, 0};
  return {false, n_running - 1};
}

}  // namespace pagoda::scheduling
