#include "engine/scheduling/step_planner.h"

#include <algorithm>
#include <cassert>

namespace pagoda::scheduling {

SequenceView view_of(const Sequence& seq) {
  return {seq.status, seq.pending(), seq.n_cached, seq.lora.get(), &seq.table};
}

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
  plan.pages = 0;
  int32_t budget = max_tokens_;
  const LoraWeights* only = mixed_adapter_batches_ ? nullptr : running[turn % running.size()].adapter;
  auto excluded = [&](const SequenceView& s) { return !mixed_adapter_batches_ && s.adapter != only; };
  auto full = [&] { return int32_t(plan.entries.size()) == max_entries_ || budget == 0; };
  for (size_t i = 0; i < running.size(); ++i) {
    if (running[i].status != SequenceStatus::Decoding || excluded(running[i])) continue;
    if (full()) break;
    plan.entries.push_back({i, 1});
    --budget;
  }
  plan.decodes = plan.entries.size();
  for (size_t i = 0; i < running.size(); ++i) {
    if (running[i].status != SequenceStatus::Prefilling || excluded(running[i])) continue;
    if (full()) break;
    const int32_t n = std::min({running[i].pending, prefill_chunk_, budget});
    plan.entries.push_back({i, n});
    budget -= n;
  }
  // Speculation is a latency tool: in a full batch it would only add compute.
  plan.guess_budget = speculate && int32_t(plan.decodes) <= speculative_max_batch_ ? budget : 0;
}

void StepPlanner::set_guesses(StepPlan& plan, size_t entry, int32_t guesses) {
  assert(entry < plan.decodes);
  plan.entries[entry].guesses = guesses;
  plan.entries[entry].n_tokens = 1 + guesses;
}

void StepPlanner::count_pages(std::span<const SequenceView> running, StepPlan& plan) {
  plan.pages = 0;
  for (PlannedEntry& e : plan.entries) {
    const SequenceView& s = running[e.sequence];
    e.pages = s.table->pages_needed(s.n_cached, s.n_cached + e.n_tokens);
    plan.pages += e.pages;
  }
}

Relief StepPlanner::make_room(const StepPlan& plan, size_t n_running) {
  assert(n_running > 0);
  if (plan.speculates()) return {true, 0};
  return {false, n_running - 1};
}

}  // namespace pagoda::scheduling
