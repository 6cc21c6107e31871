// The decode step's policy without a model or a thread: what the step planner plans over
// plain views of running sequences (engine/scheduling/step_planner.h).

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "engine/scheduling/step_planner.h"

namespace pagoda::scheduling {
namespace {

constexpr int32_t kTokensPerPage = 4;

// Running sequences as the planner sees them, each with a block table holding exactly the
// pages its cached positions fill.
class Running {
 public:
  // Returns the new sequence's index.
  size_t decode(int32_t n_cached, const LoraWeights* adapter = nullptr) {
    return add(SequenceStatus::Decoding, 1, n_cached, adapter);
  }
  size_t prefill(int32_t pending, int32_t n_cached = 0, const LoraWeights* adapter = nullptr) {
    return add(SequenceStatus::Prefilling, pending, n_cached, adapter);
  }
  // The last sequence's prompt images: (position, tokens, cost in tokens, encoded yet), whose
  // rows attend to each other both ways when `bidirectional` (Gemma 3's).
  void give_images(std::vector<std::tuple<int32_t, int32_t, int32_t, bool>> images, bool bidirectional = false) {
    std::vector<SequenceImage>& list = images_.emplace_back();
    for (const auto& [position, tokens, cost, encoded] : images) {
      SequenceImage image;
      image.position = position, image.tokens = tokens, image.cost_tokens = cost;
      image.bidirectional = bidirectional;
      if (encoded) image.rows = std::make_shared<const std::vector<float>>();
      list.push_back(std::move(image));
    }
    views_.back().images = list;
  }
  void remove_last() {
    views_.pop_back();
    tables_.pop_back();
  }
  std::span<const SequenceView> views() const { return views_; }
  size_t size() const { return views_.size(); }
  int32_t held_pages(size_t i) const { return tables_[i].held_pages(); }

 private:
  size_t add(SequenceStatus status, int32_t pending, int32_t n_cached, const LoraWeights* adapter) {
    BlockTable& table = tables_.emplace_back(kTokensPerPage);
    std::vector<int32_t> pages(size_t(table.pages_needed(0, n_cached)));
    for (int32_t& p : pages) p = next_page_++;
    table.grow(0, n_cached, pages);
    views_.push_back({status, pending, n_cached, adapter, &table});
    return views_.size() - 1;
  }

  std::deque<BlockTable> tables_;  // a deque, so the views' pointers stay valid
  std::deque<std::vector<SequenceImage>> images_;
  std::vector<SequenceView> views_;
  int32_t next_page_ = 0;
};

// A distinct address per adapter: the planner only compares them.
const LoraWeights* adapter(int id) {
  static const char tags[4] = {};
  return reinterpret_cast<const LoraWeights*>(&tags[id]);
}

EngineConfig config_with(int32_t max_tokens, int32_t max_entries, int32_t prefill_chunk) {
  EngineConfig config;
  config.max_tokens_per_step = max_tokens;
  config.max_entries_per_step = max_entries;
  config.prefill_chunk = prefill_chunk;
  return config;
}

// (sequence, n_tokens) of every entry, in order.
std::vector<std::pair<size_t, int32_t>> entries(const StepPlan& plan) {
  std::vector<std::pair<size_t, int32_t>> out;
  for (const PlannedEntry& e : plan.entries) out.emplace_back(e.sequence, e.n_tokens);
  return out;
}

using Entries = std::vector<std::pair<size_t, int32_t>>;

TEST(StepPlanner, DecodesComeBeforePrefillChunks) {
  Running running;
  const size_t a = running.prefill(10);
  const size_t b = running.decode(20);
  const size_t c = running.prefill(5);
  const size_t d = running.decode(7);
  StepPlan plan;
  StepPlanner(config_with(512, 256, 256)).plan_entries(running.views(), 0, true, plan);
  EXPECT_EQ(entries(plan), (Entries{{b, 1}, {d, 1}, {a, 10}, {c, 5}}));
  EXPECT_EQ(plan.decodes, 2u);
}

TEST(StepPlanner, PrefillChunksAreCutToWhatIsLeftOfTheTokenBudget) {
  Running running;
  const size_t a = running.prefill(10);
  const size_t b = running.decode(3);
  running.prefill(5);
  const size_t d = running.decode(9);
  StepPlan plan;
  StepPlanner(config_with(8, 256, 256)).plan_entries(running.views(), 0, true, plan);
  // Two decodes leave 6 tokens: the first prompt gets them all, the second waits.
  EXPECT_EQ(entries(plan), (Entries{{b, 1}, {d, 1}, {a, 6}}));
}

TEST(StepPlanner, PrefillChunksAreAtMostPrefillChunk) {
  Running running;
  const size_t a = running.prefill(10);
  const size_t b = running.prefill(3, 8);
  const size_t c = running.prefill(9);
  StepPlan plan;
  StepPlanner(config_with(512, 256, 4)).plan_entries(running.views(), 0, true, plan);
  EXPECT_EQ(entries(plan), (Entries{{a, 4}, {b, 3}, {c, 4}}));
  EXPECT_EQ(plan.decodes, 0u);
}

TEST(StepPlanner, TheEntryCapKeepsDecodesBeforePrefills) {
  Running running;
  const size_t a = running.decode(4);
  running.prefill(8);
  const size_t c = running.decode(5);
  const size_t d = running.decode(6);
  running.decode(7);
  StepPlan plan;
  StepPlanner(config_with(512, 3, 256)).plan_entries(running.views(), 0, true, plan);
  EXPECT_EQ(entries(plan), (Entries{{a, 1}, {c, 1}, {d, 1}}));
}

TEST(StepPlanner, TheEntryCapEndsThePrefillChunks) {
  Running running;
  const size_t a = running.prefill(8);
  const size_t b = running.decode(5);
  running.prefill(6);
  StepPlan plan;
  StepPlanner(config_with(512, 2, 256)).plan_entries(running.views(), 0, true, plan);
  EXPECT_EQ(entries(plan), (Entries{{b, 1}, {a, 8}}));
}

TEST(StepPlanner, ATokenBudgetSmallerThanTheDecodesLeavesTheLastOnesOut) {
  Running running;
  const size_t a = running.decode(4);
  const size_t b = running.decode(5);
  running.decode(6);
  running.prefill(3);
  StepPlan plan;
  StepPlanner(config_with(2, 256, 256)).plan_entries(running.views(), 0, true, plan);
  EXPECT_EQ(entries(plan), (Entries{{a, 1}, {b, 1}}));
  EXPECT_EQ(plan.guess_budget, 0);
}

TEST(StepPlanner, WithoutMixedBatchesAStepServesOnlyTheAdapterWhoseTurnItIs) {
  Running running;
  const size_t x_decode = running.decode(4, adapter(0));
  const size_t y_decode = running.decode(4, adapter(1));
  const size_t base_prefill = running.prefill(6);
  const size_t x_prefill = running.prefill(6, 0, adapter(0));
  const size_t base_decode = running.decode(4);
  EngineConfig config = config_with(512, 256, 256);
  config.mixed_adapter_batches = false;
  const StepPlanner planner(config);
  StepPlan plan;
  planner.plan_entries(running.views(), 0, true, plan);  // running[0]'s adapter: X
  EXPECT_EQ(entries(plan), (Entries{{x_decode, 1}, {x_prefill, 6}}));
  planner.plan_entries(running.views(), 1, true, plan);
  EXPECT_EQ(entries(plan), (Entries{{y_decode, 1}}));
  planner.plan_entries(running.views(), 2, true, plan);  // the base model's turn
  EXPECT_EQ(entries(plan), (Entries{{base_decode, 1}, {base_prefill, 6}}));
  planner.plan_entries(running.views(), 5, true, plan);  // the turns go round
  EXPECT_EQ(entries(plan), (Entries{{x_decode, 1}, {x_prefill, 6}}));
}

TEST(StepPlanner, MixedBatchesServeEveryAdapterInOneStep) {
  Running running;
  running.decode(4, adapter(0));
  running.decode(4, adapter(1));
  running.prefill(6);
  StepPlan plan;
  StepPlanner(config_with(512, 256, 256)).plan_entries(running.views(), 1, true, plan);
  EXPECT_EQ(entries(plan), (Entries{{0, 1}, {1, 1}, {2, 6}}));
}

TEST(StepPlanner, SequencesOfOtherAdaptersDoNotUseUpTheCaps) {
  Running running;
  running.decode(4, adapter(1));
  running.decode(4, adapter(1));
  running.prefill(6, 0, adapter(1));
  const size_t x1 = running.decode(4, adapter(0));
  const size_t x2 = running.decode(4, adapter(0));
  const size_t x3 = running.prefill(6, 0, adapter(0));
  EngineConfig config = config_with(4, 2, 256);
  config.mixed_adapter_batches = false;
  const StepPlanner planner(config);
  StepPlan plan;
  planner.plan_entries(running.views(), x1, true, plan);
  EXPECT_EQ(entries(plan), (Entries{{x1, 1}, {x2, 1}}));
  config.max_entries_per_step = 256;
  StepPlanner(config).plan_entries(running.views(), x1, true, plan);
  EXPECT_EQ(entries(plan), (Entries{{x1, 1}, {x2, 1}, {x3, 2}}));
}

// A proposer that wants `wanted` guesses of every decode and records the limits it was given.
struct FakeProposer {
  int32_t wanted;
  std::vector<std::pair<size_t, int32_t>> asked;  // (entry, limit)
  int32_t operator()(size_t entry, int32_t limit) {
    asked.emplace_back(entry, limit);
    return std::min(wanted, limit);
  }
};

TEST(StepPlanner, GuessesTakeOnlyWhatIsLeftOfTheBudgetInDecodeOrder) {
  Running running;
  running.decode(4);
  running.prefill(5);
  running.decode(6);
  running.decode(8);
  StepPlan plan;
  StepPlanner(config_with(11, 256, 256)).plan_entries(running.views(), 0, true, plan);
  // Three decodes and the prompt's five tokens leave three for guesses.
  ASSERT_EQ(plan.guess_budget, 3);
  FakeProposer propose{2, {}};
  StepPlanner::hand_out_guesses(plan, std::ref(propose));
  // The first takes two, the second is held to the one left, the third is not asked.
  EXPECT_EQ(propose.asked, (std::vector<std::pair<size_t, int32_t>>{{0, 3}, {1, 1}}));
  EXPECT_EQ(plan.guess_budget, 0);
}

TEST(StepPlanner, GuessesNeverDisplaceADecodeOrAPrefillChunk) {
  Running running;
  running.decode(4);
  running.prefill(20);
  StepPlan plan;
  StepPlanner(config_with(16, 256, 256)).plan_entries(running.views(), 0, true, plan);
  EXPECT_EQ(entries(plan), (Entries{{0, 1}, {1, 15}}));
  EXPECT_EQ(plan.guess_budget, 0);
  FakeProposer propose{4, {}};
  StepPlanner::hand_out_guesses(plan, std::ref(propose));
  EXPECT_TRUE(propose.asked.empty());
}

TEST(StepPlanner, NoSpeculationAboveSpeculativeMaxBatchDecodes) {
  Running running;
  running.decode(4);
  running.decode(5);
  running.decode(6);
  EngineConfig config = config_with(512, 256, 256);
  config.speculative_max_batch = 2;
  StepPlan plan;
  StepPlanner(config).plan_entries(running.views(), 0, true, plan);
  EXPECT_EQ(plan.guess_budget, 0);
  FakeProposer propose{4, {}};
  StepPlanner::hand_out_guesses(plan, std::ref(propose));
  EXPECT_TRUE(propose.asked.empty());

  running.remove_last();  // two decodes: at the limit, they speculate
  StepPlanner(config).plan_entries(running.views(), 0, true, plan);
  EXPECT_EQ(plan.guess_budget, 512 - 2);
  StepPlanner::hand_out_guesses(plan, std::ref(propose));
  EXPECT_EQ(propose.asked.size(), 2u);
}

TEST(StepPlanner, AStepWhoseSpeculationSteppedAsideHasNoGuessBudget) {
  Running running;
  running.decode(4);
  StepPlan plan;
  StepPlanner(config_with(512, 256, 256)).plan_entries(running.views(), 0, false, plan);
  EXPECT_EQ(plan.guess_budget, 0);
  EXPECT_EQ(entries(plan), (Entries{{0, 1}}));
}

TEST(StepPlanner, ADecodeFeedsItsGuessesAfterItsLastToken) {
  Running running;
  running.decode(4);
  running.decode(6);
  StepPlan plan;
  StepPlanner(config_with(512, 256, 256)).plan_entries(running.views(), 0, true, plan);
  EXPECT_FALSE(plan.speculates());
  StepPlanner::set_guesses(running.views(), plan, 1, 3);
  EXPECT_EQ(entries(plan), (Entries{{0, 1}, {1, 4}}));
  EXPECT_EQ(plan.entries[1].guesses, 3);
  EXPECT_TRUE(plan.speculates());
}

TEST(StepPlanner, PagesAreCountedForTheNewPositionsOnly) {
  Running running;
  running.decode(4);      // its page is full: the next position needs a new one
  running.decode(5);      // room left in its second page
  running.prefill(6, 0);  // positions 0..5: two pages
  running.prefill(4, 6);  // positions 6..9: its second page has room for 6 and 7, then one more
  StepPlan plan;
  StepPlanner(config_with(512, 256, 256)).plan_entries(running.views(), 0, true, plan);
  std::vector<int32_t> pages;
  for (const PlannedEntry& e : plan.entries) pages.push_back(e.pages);
  EXPECT_EQ(pages, (std::vector<int32_t>{1, 0, 2, 1}));
  EXPECT_EQ(plan.pages, 4);

  StepPlanner::set_guesses(running.views(), plan, 1, 4);  // positions 5..9 reach a third page
  EXPECT_EQ(plan.entries[1].pages, 1);
  EXPECT_EQ(plan.pages, 5);
  StepPlanner::set_guesses(running.views(), plan, 1, 0);  // the guesses did not come
  EXPECT_EQ(plan.entries[1].pages, 0);
  EXPECT_EQ(plan.pages, 4);
}

TEST(StepPlanner, ADryPoolPreemptsTheMostRecentlyAdmittedFirst) {
  Running running;
  for (int i = 0; i < 4; ++i) running.decode(4);
  StepPlan plan;
  StepPlanner(config_with(512, 256, 256)).plan_entries(running.views(), 0, false, plan);
  const Relief relief = StepPlanner::make_room(plan, running.size());
  EXPECT_FALSE(relief.drop_speculation);
  EXPECT_EQ(relief.victim, 3u);
}

// The scheduler's retry loop over a pool with `free` pages, where a preempted sequence's pages
// come back: what gave way, in order, until the plan's pages fit.
std::vector<std::string> outcomes(Running& running, const StepPlanner& planner, int32_t free, int32_t wanted_guesses) {
  std::vector<std::string> seen;
  bool speculate = true;
  size_t turn = 0;
  StepPlan plan;
  while (running.size() > 0) {
    planner.plan_entries(running.views(), turn++, speculate, plan);
    FakeProposer propose{wanted_guesses, {}};
    StepPlanner::hand_out_guesses(plan, std::ref(propose));
    for (const auto& [entry, limit] : propose.asked) {
      StepPlanner::set_guesses(running.views(), plan, entry, std::min(wanted_guesses, limit));
    }
    if (plan.pages <= free) {
      seen.push_back("fits in " + std::to_string(plan.pages));
      break;
    }
    const Relief relief = StepPlanner::make_room(plan, running.size());
    if (relief.drop_speculation) {
      seen.push_back("drop speculation");
      speculate = false;
      continue;
    }
    seen.push_back("preempt " + std::to_string(relief.victim));
    free += running.held_pages(relief.victim);
    running.remove_last();
  }
  return seen;
}

TEST(StepPlanner, SpeculationStepsAsideBeforeAnyoneIsPreempted) {
  // Four decodes, each at a full page: one new page each plainly, two with four guesses.
  Running running;
  for (int i = 0; i < 4; ++i) running.decode(4);
  const StepPlanner planner(config_with(512, 256, 256));
  EXPECT_EQ(outcomes(running, planner, 4, 4), (std::vector<std::string>{"drop speculation", "fits in 4"}));
}

TEST(StepPlanner, AfterSpeculationTheNewestSequencesArePreemptedUntilThePlanFits) {
  // Each of the four decodes holds one full page and needs another, with one page free: each
  // preemption gives a page back and needs one fewer, so the last two go.
  Running running;
  for (int i = 0; i < 4; ++i) running.decode(4);
  const StepPlanner planner(config_with(512, 256, 256));
  EXPECT_EQ(outcomes(running, planner, 1, 4),
            (std::vector<std::string>{"drop speculation", "preempt 3", "preempt 2", "fits in 2"}));
}

TEST(StepPlanner, WithNothingToSpeculateTheFirstReliefIsAPreemption) {
  Running running;
  for (int i = 0; i < 3; ++i) running.decode(4);
  const StepPlanner planner(config_with(512, 256, 256));
  EXPECT_EQ(outcomes(running, planner, 2, 0), (std::vector<std::string>{"preempt 2", "fits in 2"}));
}

TEST(StepPlanner, TheChunkThatFirstFeedsAnImagePaysForEncodingIt) {
  const StepPlanner planner(config_with(512, 16, 256));
  Running r;
  r.prefill(400);
  r.give_images({{10, 64, 300, false}});
  r.prefill(100);
  StepPlan plan;
  planner.plan_entries(r.views(), 0, false, plan);
  // 256 tokens and 300 for the image: the budget is spent, the second sequence waits.
  EXPECT_EQ(entries(plan), (std::vector<std::pair<size_t, int32_t>>{{0, 256}}));
}

TEST(StepPlanner, AnImageThatDoesNotFitStopsALaterChunkBeforeIt) {
  const StepPlanner planner(config_with(512, 16, 256));
  Running r;
  r.prefill(300);
  r.prefill(200, 40);
  r.give_images({{45, 64, 400, false}});
  r.prefill(200);
  r.give_images({{0, 16, 400, false}});
  StepPlan plan;
  planner.plan_entries(r.views(), 0, false, plan);
  // The second chunk stops at its image; the third starts with one and waits for a step with
  // room; nothing else is left for the third's budget anyway.
  EXPECT_EQ(entries(plan), (std::vector<std::pair<size_t, int32_t>>{{0, 256}, {1, 5}}));
}

TEST(StepPlanner, AnImageAlreadyEncodedBehindOrPastTheChunkCostsNothing) {
  const StepPlanner planner(config_with(512, 16, 256));
  Running r;
  r.prefill(100);
  r.prefill(200, 40);
  r.give_images({{0, 16, 400, true}, {50, 16, 400, true}, {300, 16, 400, false}});
  StepPlan plan;
  planner.plan_entries(r.views(), 0, false, plan);
  EXPECT_EQ(entries(plan), (std::vector<std::pair<size_t, int32_t>>{{0, 100}, {1, 200}}));
}

TEST(StepPlanner, AnImageAPrefixHitCoversWholeCostsNothingThoughNeverEncoded) {
  const StepPlanner planner(config_with(512, 16, 256));
  Running r;
  r.prefill(100);
  r.prefill(200, 40);  // its first 40 positions came from the prefix cache
  r.give_images({{8, 16, 400, false}, {24, 16, 400, false}});
  StepPlan plan;
  planner.plan_entries(r.views(), 0, false, plan);
  EXPECT_EQ(entries(plan), (std::vector<std::pair<size_t, int32_t>>{{0, 100}, {1, 200}}));
}

TEST(StepPlanner, AnImageAPrefixHitEndsInsideIsPaidForByTheChunkThatFeedsItsOtherRows) {
  const StepPlanner planner(config_with(512, 16, 256));
  Running r;
  r.prefill(100, 40);
  r.give_images({{32, 16, 400, false}});  // rows 32..39 cached, 40..47 to feed
  r.prefill(100);
  StepPlan plan;
  planner.plan_entries(r.views(), 0, false, plan);
  // 100 tokens and 400 for the image leave 12: the second sequence's chunk gets them.
  EXPECT_EQ(entries(plan), (std::vector<std::pair<size_t, int32_t>>{{0, 100}, {1, 12}}));
}

// ---- Images whose rows attend to each other both ways: never cut across chunks ----

TEST(StepPlanner, AChunkStopsBeforeABidirectionalImageItWouldCut) {
  const StepPlanner planner(config_with(512, 16, 256));
  for (bool bidirectional : {false, true}) {
    Running r;
    r.prefill(300);
    r.give_images({{200, 100, 0, true}}, bidirectional);
    StepPlan plan;
    planner.plan_entries(r.views(), 0, false, plan);
    // A LLaVA image may be cut; a Gemma 3 image waits for the next chunk, which starts with it.
    EXPECT_EQ(entries(plan), (Entries{{0, bidirectional ? 200 : 256}}));
  }
}

TEST(StepPlanner, AChunkThatHoldsBidirectionalImagesWholeIsNotCut) {
  const StepPlanner planner(config_with(512, 16, 256));
  Running r;
  r.prefill(300, 40);
  r.give_images({{0, 30, 0, true}, {50, 100, 0, true}, {200, 64, 0, true}}, true);
  StepPlan plan;
  planner.plan_entries(r.views(), 0, false, plan);
  // Positions 40–295: the first image is cached already, the other two are whole in the chunk.
  EXPECT_EQ(entries(plan), (Entries{{0, 256}}));
}

TEST(StepPlanner, TheStepsFirstChunkTakesABidirectionalImageWholeEvenPastTheBudget) {
  const StepPlanner planner(config_with(64, 16, 32));
  Running r;
  r.decode(20);
  r.prefill(300, 10);
  r.give_images({{10, 100, 50, false}}, true);
  r.prefill(20);
  StepPlan plan;
  planner.plan_entries(r.views(), 0, false, plan);
  // Larger than the budget and the chunk size, the image could never come in parts: it comes
  // whole, its pages counted, and nothing else fits after it.
  EXPECT_EQ(entries(plan), (Entries{{0, 1}, {1, 100}}));
  EXPECT_EQ(plan.entries[1].pages, 25);  // positions 12–109, 4 a page (10 and 11 have theirs)
}

TEST(StepPlanner, ALaterChunkStartingWithABidirectionalImageThatDoesNotFitWaits) {
  const StepPlanner planner(config_with(128, 16, 64));
  Running r;
  r.prefill(50);
  r.prefill(200);
  r.give_images({{0, 100, 0, true}}, true);
  r.prefill(10);
  StepPlan plan;
  planner.plan_entries(r.views(), 0, false, plan);
  // The second would get 64 of its image's 100 positions: it waits for a step it starts.
  EXPECT_EQ(entries(plan), (Entries{{0, 50}, {2, 10}}));
  Running alone;
  alone.prefill(200);
  alone.give_images({{0, 100, 0, true}}, true);
  planner.plan_entries(alone.views(), 0, false, plan);
  EXPECT_EQ(entries(plan), (Entries{{0, 100}}));
}

}  // namespace
}  // namespace pagoda::scheduling
