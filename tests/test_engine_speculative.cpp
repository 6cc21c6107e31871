// Speculative decoding (n-gram and draft-model proposers) gives plain decoding's output bit for
// bit: the same tokens, logprobs, text and finish reason, greedy and seeded, alone and batched,
// with penalties, min_tokens, stop rules, grammars, LoRA adapters, prefix-cache hits,
// preemption (recompute and swap) and cancel; and every KV page comes back, the draft model's
// too. Each comparison also checks that guesses were made and (but for a random draft model)
// accepted, so it cannot pass by never speculating.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "engine/kv/block_table.h"
#include "engine/speculation/draft_length.h"
#include "engine/speculation/ngram_proposer.h"
#include "testing/lora_synth.h"
#include "testing/synth.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using test::await;

SpeculativeParams ngram(int32_t draft_max = 6) {
  SpeculativeParams p;
  p.mode = SpeculativeMode::Ngram;
  p.draft_max = draft_max;
  return p;
}

// Runs `requests` all at once, each with `speculative`, and returns their completions.
std::vector<Completion> run(Engine& engine, std::vector<Request> requests, const SpeculativeParams& speculative) {
  std::vector<RequestHandle> handles;
  for (Request& r : requests) {
    r.speculative = speculative;
    handles.push_back(engine.submit(r));
  }
  std::vector<Completion> out;
  for (RequestHandle& h : handles) out.push_back(await(h));
  return out;
}

SpeculativeParams drafted(int32_t draft_max = 6) {
  SpeculativeParams p = ngram(draft_max);
  p.mode = SpeculativeMode::Draft;
  return p;
}

// Waits (with a generous limit) until the draft model's pool holds no page.
void expect_draft_idle(const Engine& engine) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (engine.metrics().draft_kv_pages_used != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(engine.metrics().draft_kv_pages_used, 0);
}

// Plain decoding, then speculation, on the same engine: the same completions, guesses made
// (and accepted, unless `expect_accepted` is false: a random draft model may guess nothing
// right), and every page back.
void expect_speculation_changes_nothing(Engine& engine, const std::vector<Request>& requests,
                                        const SpeculativeParams& speculative = ngram(), bool expect_accepted = true) {
  const EngineMetrics start = engine.metrics();
  const std::vector<Completion> plain = run(engine, requests, SpeculativeParams{});
  const EngineMetrics before = engine.metrics();
  EXPECT_EQ(before.speculative_proposed, start.speculative_proposed) << "plain decoding guessed";
  const std::vector<Completion> speculated = run(engine, requests, speculative);
  test::expect_same_completions(speculated, plain);
  const EngineMetrics after = engine.metrics();
  const int64_t proposed = after.speculative_proposed - before.speculative_proposed;
  const int64_t accepted = after.speculative_accepted - before.speculative_accepted;
  EXPECT_GT(proposed, 0) << "nothing was guessed: the test proves nothing";
  if (expect_accepted) {
    EXPECT_GT(accepted, 0) << "no guess was accepted: the test proves nothing";
  }
  EXPECT_LE(accepted, proposed);
  test::expect_engine_idle(engine);
  expect_draft_idle(engine);
}

// A request cancelled partway (`got`) ended as cancelled with a prefix of its uncancelled tokens.
void expect_cancelled_prefix(const Completion& got, const Completion& plain) {
  ASSERT_EQ(got.finish_reason, FinishReason::Cancelled);
  ASSERT_LE(got.token_ids.size(), plain.token_ids.size());
  EXPECT_TRUE(std::equal(got.token_ids.begin(), got.token_ids.end(), plain.token_ids.begin()));
}

TEST(NgramProposer, ProposesWhatFollowedTheLatestLongestMatch) {
  const std::vector<int32_t> tokens = {5, 1, 2, 3, 9, 9, 7, 2, 3, 4, 8, 6, 1, 2, 3};
  std::vector<int32_t> out;
  // "1 2 3" occurred at 1 (followed by 9 9 7 …); "2 3" later at 7 (4 8 …) loses to the longer match.
  speculation::propose_ngram(tokens, 3, 1, 4, out);
  EXPECT_EQ(out, (std::vector<int32_t>{9, 9, 7, 2}));
  out.clear();
  speculation::propose_ngram(tokens, 2, 1, 3, out);  // only bigrams: the latest "2 3" wins
  EXPECT_EQ(out, (std::vector<int32_t>{4, 8, 6}));
  out = {42};
  speculation::propose_ngram(tokens, 3, 1, 100, out);  // appends, and stops at the text's end
  EXPECT_EQ(out, (std::vector<int32_t>{42, 9, 9, 7, 2, 3, 4, 8, 6, 1, 2, 3}));
}

TEST(NgramProposer, NothingWithoutAMatchOfTheShortestLength) {
  std::vector<int32_t> out;
  speculation::propose_ngram(std::vector<int32_t>{1, 2, 3, 4}, 3, 1, 4, out);
  EXPECT_TRUE(out.empty());
  speculation::propose_ngram(std::vector<int32_t>{1, 2, 9, 1, 3, 2}, 3, 2, 4, out);  // only unigrams match
  EXPECT_TRUE(out.empty());
  speculation::propose_ngram(std::vector<int32_t>{7}, 3, 1, 4, out);
  EXPECT_TRUE(out.empty());
}

TEST(DraftLength, FollowsTheMeasuredAcceptance) {
  SpeculativeParams p = ngram(8);
  p.draft_min = 2;
  speculation::DraftLength length(p);
  EXPECT_EQ(length.next(), 8);
  length.record(8, 3);  // partial: just past what was accepted
  EXPECT_EQ(length.next(), 4);
  length.record(4, 4);  // all: longer, up to draft_max
  EXPECT_EQ(length.next(), 8);
  length.record(8, 0);  // nothing: draft_min, after a pause that doubles with each miss
  EXPECT_EQ(length.next(), 0);
  EXPECT_EQ(length.next(), 2);
  length.record(2, 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(length.next(), 0);
  EXPECT_EQ(length.next(), 2);
  for (int miss = 0; miss < 6; ++miss) {
    length.record(2, 0);
    int paused = 0;
    while (length.next() == 0) ++paused;
    EXPECT_LE(paused, speculation::DraftLength::kMaxPause);
  }
  length.record(2, 1);  // an acceptance ends the pauses
  EXPECT_EQ(length.next(), 2);
  EXPECT_FALSE(length.gave_up()) << "the n-gram proposer never gives up";
}

TEST(DraftLength, ADraftModelStepsAsideAfterMissingInARow) {
  speculation::DraftLength length(drafted(4));
  auto guess_and_miss = [&] {
    int32_t k = 0;
    for (int step = 0; step <= speculation::DraftLength::kMaxPause && k == 0; ++step) k = length.next();
    ASSERT_GT(k, 0) << "no guess after the longest pause";
    length.record(k, 0);
  };
  for (int miss = 1; miss < speculation::DraftLength::kDraftGiveUp; ++miss) guess_and_miss();
  length.record(1, 1);  // an acceptance starts the count again
  for (int miss = 1; miss < speculation::DraftLength::kDraftGiveUp; ++miss) guess_and_miss();
  EXPECT_FALSE(length.gave_up());
  guess_and_miss();
  EXPECT_TRUE(length.gave_up());
  for (int step = 0; step < 100; ++step) EXPECT_EQ(length.next(), 0);
}

TEST(DraftLength, ADraftModelStartsWithOneGuessAndIsTrustedAfterItsGuessesAreAccepted) {
  speculation::DraftLength length(drafted(8));
  EXPECT_EQ(length.next(), 1);
  for (int32_t accepted = 0; accepted < speculation::DraftLength::kDraftTrust; ++accepted) {
    EXPECT_FALSE(length.trusted());
    length.record(1, 1);  // one accepted guess at a time
  }
  EXPECT_TRUE(length.trusted());
  EXPECT_EQ(length.next(), 8);  // doubled with each fully accepted run: 2, 4, 8
  speculation::DraftLength ngram_length(ngram(8));
  EXPECT_EQ(ngram_length.next(), 8) << "the n-gram proposer's guesses are free: it starts at draft_max";
}

TEST(BlockTableRollback, GivesBackOnlyThePagesBeyondTheKeptPositions) {
  BlockTable table(4);
  table.grow(0, 16, std::vector<int32_t>{10, 11, 12, 13});
  EXPECT_EQ(table.take_pages_beyond(9), (std::vector<int32_t>{13}));  // 9 positions need 3 pages
  EXPECT_EQ(table.take_pages_beyond(12), std::vector<int32_t>{});
  EXPECT_EQ(table.take_pages_beyond(8), (std::vector<int32_t>{12}));
  EXPECT_EQ(table.pages(), (std::vector<int32_t>{10, 11}));
}

TEST(SpeculativeParams, BadValuesAreRefusedByName) {
  Engine engine({.model_path = test::tiny_gqa_model(), .threads = 1});
  Request r = test::greedy_request({1, 2, 3}, 4);
  r.speculative = ngram(4);
  r.speculative->draft_min = 5;
  try {
    engine.submit(r);
    FAIL() << "draft_min > draft_max was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("draft_min"), std::string::npos) << e.what();
  }
  r.speculative = ngram(0);
  EXPECT_THROW(engine.submit(r), Error);
  r.speculative = ngram();
  r.speculative->ngram_min = 0;
  EXPECT_THROW(engine.submit(r), Error);
  EngineConfig bad{.model_path = test::tiny_gqa_model(), .threads = 1};
  bad.speculative.ngram_max = 0;
  EXPECT_THROW(Engine{bad}, Error);
  r.speculative = drafted();
  r.speculative->draft_p_min = 1.5f;
  EXPECT_THROW(engine.submit(r), Error);
  r.speculative->draft_p_min = 0.5f;
  r.speculative->draft_probe = -1;
  try {
    engine.submit(r);
    FAIL() << "a negative draft_probe was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("draft_probe"), std::string::npos) << e.what();
  }
  r.speculative->draft_probe = 0;  // a draft model is wanted and there is none
  try {
    engine.submit(r);
    FAIL() << "a draft-mode request was accepted without a draft model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("draft model"), std::string::npos) << e.what();
  }
  EngineConfig no_draft{.model_path = test::tiny_gqa_model(), .threads = 1};
  no_draft.speculative = drafted();
  EXPECT_THROW(Engine{no_draft}, Error);
}

class EngineSpeculative : public test::StoriesTest {
 protected:
  // A story, then its opening again: the model retells it, and the n-gram proposer can guess.
  std::vector<int32_t> retelling(const test::GoldenCase& c, size_t told = 80) const {
    std::vector<int32_t> p = c.prompt_ids;
    p.insert(p.end(), c.greedy_ids.begin(), c.greedy_ids.begin() + ptrdiff_t(std::min(told, c.greedy_ids.size())));
    p.insert(p.end(), c.prompt_ids.begin() + 1, c.prompt_ids.end());
    return p;
  }

  std::vector<Request> retellings(int32_t n, int32_t logprobs = -1) const {
    std::vector<Request> rs;
    for (const test::GoldenCase& c : cases_) {
      Request r = test::greedy_request(retelling(c), n);
      r.ignore_eos = false;
      r.logprobs = logprobs;
      rs.push_back(r);
    }
    return rs;
  }
};

TEST_F(EngineSpeculative, GreedyGivesPlainTokensAndLogprobsBitForBit) {
  Engine engine({.model_path = model_, .threads = 2});
  for (Request& r : retellings(120, 3)) {  // one at a time: the single-stream case
    SCOPED_TRACE(r.prompt_ids.size());
    expect_speculation_changes_nothing(engine, {r});
  }
  expect_speculation_changes_nothing(engine, retellings(120, 3));  // all at once
  const EngineMetrics m = engine.metrics();
  EXPECT_GT(m.speculative_acceptance, 0.0);
  EXPECT_EQ(m.speculative_acceptance, double(m.speculative_accepted) / double(m.speculative_proposed));
}

TEST_F(EngineSpeculative, SeededSamplingWithPenaltiesAndMinTokensGivesPlainTokens) {
  Engine engine({.model_path = model_, .threads = 2});
  std::vector<Request> rs = retellings(100, 2);
  for (size_t i = 0; i < rs.size(); ++i) {
    SamplingParams& s = rs[i].sampling;
    s.seed = 1000 + i;
    s.temperature = i % 2 ? 0.3f : 0.8f;
    s.top_k = i % 3 == 0 ? 0 : 40;
    s.top_p = 0.95f;
    s.min_p = i % 2 ? 0.05f : 0.0f;
    s.repetition_penalty = i % 2 ? 1.05f : 1.0f;
    s.presence_penalty = i == 1 ? 0.2f : 0.0f;
    s.frequency_penalty = i == 2 ? 0.1f : 0.0f;
    s.min_tokens = 30;
  }
  expect_speculation_changes_nothing(engine, rs);
}

TEST_F(EngineSpeculative, StopRulesEndAnAcceptedRunWherePlainDecodingEnds) {
  Engine engine({.model_path = model_, .threads = 2});
  Request base = test::greedy_request(retelling(cases_.front()), 100);
  base.speculative = SpeculativeParams{};
  const Completion plain = [&] {
    RequestHandle h = engine.submit(base);
    return await(h);
  }();
  ASSERT_GE(plain.token_ids.size(), 60u);
  std::vector<Request> rs;
  for (size_t at : {5, 17, 41}) {  // a stop id met inside a run
    Request r = base;
    r.stop_token_ids = {plain.token_ids[at]};
    rs.push_back(r);
  }
  for (int32_t n : {1, 2, 7, 33}) {  // max_new_tokens inside a run
    Request r = base;
    r.max_new_tokens = n;
    rs.push_back(r);
  }
  // A stop string from the middle of the output.
  Request s = base;
  s.stop_strings = {engine.detokenize({plain.token_ids.begin() + 30, plain.token_ids.begin() + 33})};
  rs.push_back(s);
  Request eos = base;  // EOS ends it (or max_new_tokens, as in plain decoding)
  eos.ignore_eos = false;
  eos.max_new_tokens = 300;
  rs.push_back(eos);
  expect_speculation_changes_nothing(engine, rs);
}

TEST_F(EngineSpeculative, GrammarMasksAreAppliedRowByRow) {
  Engine engine({.model_path = model_, .threads = 2});
  std::vector<Request> rs = retellings(60);
  for (size_t i = 0; i < rs.size(); ++i) {
    // Any words the story model writes, up to a full stop: the mask refuses some of its tokens.
    rs[i].grammar = R"(root ::= [a-zA-Z ,]{1,200} "." [a-zA-Z ,.]*)";
    rs[i].sampling.temperature = i % 2 ? 0.5f : 0.0f;
    rs[i].sampling.seed = 7 + i;
  }
  expect_speculation_changes_nothing(engine, rs);
}

TEST_F(EngineSpeculative, PrefixCacheHitsGivePlainTokens) {
  Engine engine({.model_path = model_, .threads = 2, .tokens_per_page = 8});
  const std::vector<Request> rs = retellings(80);
  expect_speculation_changes_nothing(engine, rs);
  const int64_t hits = engine.metrics().prefix_hit_tokens;
  EXPECT_GT(hits, 0) << "the second pass found nothing cached";
  // Speculated pages were named: a third pass, speculating, reads them and still agrees.
  expect_speculation_changes_nothing(engine, rs);
  EXPECT_GT(engine.metrics().prefix_hit_tokens, hits);
}

TEST_F(EngineSpeculative, PreemptionInTheMiddleOfSpeculationGivesPlainTokens) {
  for (PreemptionMode mode : {PreemptionMode::Recompute, PreemptionMode::Swap}) {
    SCOPED_TRACE(mode == PreemptionMode::Swap ? "swap" : "recompute");
    // Room for about two of the five sequences at once: the others are preempted mid-run.
    Engine engine({.model_path = model_,
                   .threads = 2,
                   .kv_pages = 40,
                   .tokens_per_page = 8,
                   .preemption = mode,
                   .prefix_caching = false});
    std::vector<Request> rs = retellings(120, 1);
    for (size_t i = 0; i < rs.size(); ++i) {
      rs[i].sampling.temperature = i % 2 ? 0.7f : 0.0f;
      rs[i].sampling.seed = 99 + i;
    }
    const int64_t before = engine.metrics().preempted;
    expect_speculation_changes_nothing(engine, rs);
    EXPECT_GT(engine.metrics().preempted, before) << "nothing was preempted";
  }
}

TEST_F(EngineSpeculative, CancelInTheMiddleOfSpeculationReturnsEveryPage) {
  Engine engine({.model_path = model_, .threads = 2});
  Request r = test::greedy_request(retelling(cases_.front()), 150);
  r.speculative = ngram();
  const Completion plain = [&] {
    Request p = r;
    p.speculative = SpeculativeParams{};
    RequestHandle h = engine.submit(p);
    return await(h);
  }();
  ASSERT_NO_FATAL_FAILURE(expect_cancelled_prefix(test::SelfCancellingRequest(engine, r, 20).await(), plain));
  EXPECT_GT(engine.metrics().speculative_accepted, 0);
  test::expect_engine_idle(engine);
}

// The draft-model proposer on stories260K: the model as its own draft (every greedy guess
// right), and a random model with stories260K's vocabulary (almost every guess wrong).
class EngineSpeculativeDraft : public EngineSpeculative {
 protected:
  const std::string& random_draft() const {
    static const std::string path = [this] {
      ModelConfig c;
      c.dim = 32, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_dim = 64, c.context_length = 512;
      SynthSpec spec{c, 11};
      spec.vocab_path = model_;
      const std::string p = test::scratch_path("random-draft.gguf");
      write_synth_model(p, spec);
      return p;
    }();
    return path;
  }

  std::vector<Request> sampled(int32_t n) const {
    std::vector<Request> rs = retellings(n, 2);
    for (size_t i = 0; i < rs.size(); ++i) {
      rs[i].sampling.seed = 500 + i;
      rs[i].sampling.temperature = i % 2 ? 0.0f : 0.7f;
      rs[i].sampling.top_k = 40;
      rs[i].sampling.repetition_penalty = i % 3 == 0 ? 1.1f : 1.0f;
    }
    return rs;
  }
};

TEST_F(EngineSpeculativeDraft, ADifferentVocabularyIsRefusedNamingBothFiles) {
  EngineConfig c{.model_path = model_, .threads = 1};
  c.draft_model_path = test::tiny_gqa_model();  // 1000 synthetic tokens, not stories260K's 512
  try {
    Engine engine(c);
    FAIL() << "a draft model with another vocabulary was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(model_), std::string::npos) << what;
    EXPECT_NE(what.find(test::tiny_gqa_model()), std::string::npos) << what;
    EXPECT_NE(what.find("vocabular"), std::string::npos) << what;
  }
}

TEST_F(EngineSpeculativeDraft, TheModelAsItsOwnDraftIsRightOnEveryGreedyGuess) {
  // Short prefill chunks: the draft catches up with each prompt over several steps too.
  EngineConfig c{.model_path = model_, .threads = 2, .prefill_chunk = 32};
  c.draft_model_path = model_;
  Engine engine(c);
  EXPECT_GT(engine.metrics().draft_kv_pages_total, 0);
  SpeculativeParams whole = drafted();
  whole.draft_probe = 0;                   // the draft reads all of the context from the start, as the model does
  for (Request& r : retellings(120, 3)) {  // one at a time, then all at once
    expect_speculation_changes_nothing(engine, {r}, whole);
  }
  expect_speculation_changes_nothing(engine, retellings(120, 3), whole);
  // The draft computes the model's own logits, so its greedy guess is the model's token,
  // unless its cache had gone wrong (a rollback that kept a rejected position, say).
  const EngineMetrics m = engine.metrics();
  EXPECT_GT(m.speculative_proposed, 200);
  EXPECT_EQ(m.speculative_accepted, m.speculative_proposed);
  // Each speculative pass found its prompt cached by the plain pass before it: the model
  // skipped those positions, the draft still caught up with all of them.
  EXPECT_GT(m.prefix_hit_tokens, 0);
}

TEST_F(EngineSpeculativeDraft, SeededSamplingWithTheModelAsItsOwnDraftGivesPlainTokens) {
  EngineConfig c{.model_path = model_, .threads = 2};
  c.draft_model_path = model_;
  Engine engine(c);
  expect_speculation_changes_nothing(engine, sampled(100), drafted());
  EXPECT_GT(engine.metrics().speculative_acceptance, 0.5);
}

TEST_F(EngineSpeculativeDraft, ARandomDraftModelGuessesWrongAndChangesNothing) {
  EngineConfig c{.model_path = model_, .threads = 2};
  c.draft_model_path = random_draft();
  Engine engine(c);
  expect_speculation_changes_nothing(engine, retellings(100, 2), drafted(), false);
  expect_speculation_changes_nothing(engine, sampled(100), drafted(), false);
  EXPECT_LT(engine.metrics().speculative_acceptance, 0.5);
}

TEST_F(EngineSpeculativeDraft, DraftPMinStopsUnsureGuesses) {
  EngineConfig c{.model_path = model_, .threads = 2};
  c.draft_model_path = model_;
  Engine engine(c);
  const std::vector<Request> rs = retellings(100);
  expect_speculation_changes_nothing(engine, rs, drafted());
  const int64_t all = engine.metrics().speculative_proposed;
  SpeculativeParams sure = drafted();
  sure.draft_p_min = 0.9f;
  expect_speculation_changes_nothing(engine, rs, sure);
  const int64_t fewer = engine.metrics().speculative_proposed - all;
  EXPECT_LT(fewer, all) << "a draft_p_min of 0.9 stopped no guess";
}

// A draft never sure enough to guess (draft_p_min 1) steps aside after its misses: it stops
// reading the sequence and its pages are back while the request still runs. It never read
// more than the first token and the context's tail (draft_probe), not the whole prompt.
TEST_F(EngineSpeculativeDraft, ADraftThatNeverGuessesReadsOnlyTheTailThenStepsAside) {
  constexpr int32_t kPage = 8;
  EngineConfig c{.model_path = model_, .threads = 2, .tokens_per_page = kPage};
  c.draft_model_path = model_;
  Engine engine(c);
  Request r = retellings(150)[0];
  r.ignore_eos = true;
  r.speculative = drafted();
  r.speculative->draft_p_min = 1.0f;
  r.speculative->draft_probe = 16;
  // The probe, what is decoded until the draft gives up (4 tries in a row: a draft on
  // probation does not pause; 16 tokens is a generous bound) and its guesses, against the
  // prompt that it never reads.
  const int64_t probe_pages = (1 + 16 + 16 + r.speculative->draft_max + kPage - 1) / kPage;
  ASSERT_GT(int64_t(r.prompt_ids.size()), 2 * probe_pages * kPage) << "the prompt is too short to tell";
  std::atomic<int> seen{0};
  std::atomic<int64_t> draft_pages_late{-1}, draft_pages_peak{0};
  r.on_token = [&](const StreamEvent&) {
    draft_pages_peak = std::max(draft_pages_peak.load(), engine.metrics().draft_kv_pages_used);
    if (++seen == 140) draft_pages_late = engine.metrics().draft_kv_pages_used;
  };
  const Completion done = engine.submit(r).get();
  ASSERT_EQ(done.token_ids.size(), 150u);
  EXPECT_EQ(engine.metrics().speculative_proposed, 0);
  EXPECT_GT(draft_pages_peak.load(), 0) << "the draft read nothing";
  EXPECT_LE(draft_pages_peak.load(), probe_pages) << "the draft read more than the context's tail";
  EXPECT_EQ(draft_pages_late.load(), 0) << "the draft still held the sequence's cache";
  test::expect_engine_idle(engine);
  expect_draft_idle(engine);
}

// The model as its own draft probing on the context's tail: its guesses from the tail are
// mostly right, so it earns trust and then reads the whole context; the tokens are plain
// decoding's either way.
TEST_F(EngineSpeculativeDraft, ADraftProbesOnTheTailThenReadsTheWholeContext) {
  constexpr int32_t kPage = 8;
  EngineConfig c{.model_path = model_, .threads = 2, .tokens_per_page = kPage};
  c.draft_model_path = model_;
  Engine engine(c);
  SpeculativeParams probing = drafted();
  probing.draft_probe = 8;
  for (Request r : retellings(100)) {
    const auto prompt_pages = int64_t(r.prompt_ids.size()) / kPage;
    ASSERT_GT(prompt_pages, 4) << "the prompt is too short to tell";
    const std::vector<Completion> plain = run(engine, {r}, SpeculativeParams{});
    std::atomic<int> seen{0};
    std::atomic<int64_t> pages_at_second{-1}, peak{0};
    r.on_token = [&](const StreamEvent&) {
      const int64_t pages = engine.metrics().draft_kv_pages_used;
      peak = std::max(peak.load(), pages);
      if (++seen == 2) pages_at_second = pages;
    };
    const EngineMetrics before = engine.metrics();
    test::expect_same_completions(run(engine, {r}, probing), plain);
    const EngineMetrics after = engine.metrics();
    test::expect_engine_idle(engine);
    expect_draft_idle(engine);
    // The first guesses were drafted from the first token and the last 8 (one page, or two).
    EXPECT_LE(pages_at_second.load(), 2);
    EXPECT_GE(peak.load(), prompt_pages) << "the trusted draft never read the whole context";
    EXPECT_GT(after.speculative_accepted - before.speculative_accepted,
              (after.speculative_proposed - before.speculative_proposed) * 8 / 10);
  }
}

TEST_F(EngineSpeculativeDraft, PreemptionAndATightDraftPoolGivePlainTokens) {
  for (PreemptionMode mode : {PreemptionMode::Recompute, PreemptionMode::Swap}) {
    SCOPED_TRACE(mode == PreemptionMode::Swap ? "swap" : "recompute");
    // Room for about two of the five sequences at once in either cache: the others are
    // preempted mid-run, and find no draft pages now and then.
    Engine engine({.model_path = model_,
                   .threads = 2,
                   .kv_pages = 40,
                   .tokens_per_page = 8,
                   .prefill_chunk = 24,
                   .preemption = mode,
                   .prefix_caching = false,
                   .draft_model_path = model_,
                   .draft_kv_pages = 40});
    EXPECT_EQ(engine.metrics().draft_kv_pages_total, 40);
    const int64_t before = engine.metrics().preempted;
    expect_speculation_changes_nothing(engine, sampled(120), drafted());
    EXPECT_GT(engine.metrics().preempted, before) << "nothing was preempted";
  }
}

TEST_F(EngineSpeculativeDraft, CancelInTheMiddleOfDraftingReturnsEveryPage) {
  EngineConfig c{.model_path = model_, .threads = 2};
  c.draft_model_path = model_;
  Engine engine(c);
  Request r = test::greedy_request(retelling(cases_.front()), 150);
  r.speculative = SpeculativeParams{};
  const Completion plain = [&] {
    RequestHandle h = engine.submit(r);
    return await(h);
  }();
  r.speculative = drafted();
  ASSERT_NO_FATAL_FAILURE(expect_cancelled_prefix(test::SelfCancellingRequest(engine, r, 20).await(), plain));
  EXPECT_GT(engine.metrics().speculative_accepted, 0);
  test::expect_engine_idle(engine);
  expect_draft_idle(engine);
}

TEST_F(EngineSpeculativeDraft, NgramAndDraftRequestsShareSteps) {
  EngineConfig c{.model_path = model_, .threads = 2};
  c.draft_model_path = model_;
  Engine engine(c);
  std::vector<Request> rs = sampled(80);
  const std::vector<Completion> plain = run(engine, rs, SpeculativeParams{});
  std::vector<RequestHandle> handles;
  for (size_t i = 0; i < rs.size(); ++i) {
    rs[i].speculative = i % 2 ? ngram() : drafted();
    handles.push_back(engine.submit(rs[i]));
  }
  std::vector<Completion> mixed;
  for (RequestHandle& h : handles) mixed.push_back(await(h));
  test::expect_same_completions(mixed, plain);
  EXPECT_GT(engine.metrics().speculative_accepted, 0);
  test::expect_engine_idle(engine);
  expect_draft_idle(engine);
}

// Requests on `engine`'s adapters "a0", "a1" and the base, greedy and seeded sampling, each a
// random run repeated four times.
std::vector<Request> adapter_requests() {
  std::vector<Request> rs;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> run;
    for (int t = 0; t < 12; ++t) run.push_back(1 + (t * 37 + i * 101) % 999);
    std::vector<int32_t> prompt;
    for (int rep = 0; rep < 4; ++rep) prompt.insert(prompt.end(), run.begin(), run.end());
    Request r = test::greedy_request(prompt, 60, i % 3 == 2 ? "" : "a" + std::to_string(i % 3));
    r.sampling.temperature = i < 3 ? 0.0f : 0.6f;
    r.sampling.seed = uint64_t(i);
    r.logprobs = 2;
    rs.push_back(r);
  }
  return rs;
}

void load_two_adapters(Engine& engine) {
  for (int k = 0; k < 2; ++k) {
    LoraSynthSpec spec;
    spec.rank = 4;
    spec.alpha = 8.0f;
    spec.seed = uint64_t(70 + k);
    const std::string path = test::scratch_path("spec-adapter" + std::to_string(k) + ".gguf");
    write_synth_lora(path, test::tiny_gqa_config(), spec);
    engine.load_adapter("a" + std::to_string(k), path);
  }
}

// A random model whose prompt is a random run repeated: LoRA adapters (one per request, and
// the base) and seeded sampling, several speculating at once.
TEST(EngineSpeculativeRandom, LoraAdaptersAndRepeatedPromptsGivePlainTokens) {
  Engine engine({.model_path = test::tiny_gqa_model(), .threads = 2, .kv_cache_type = KvCacheType::F32});
  load_two_adapters(engine);
  expect_speculation_changes_nothing(engine, adapter_requests());
}

// The draft model runs without the request's adapter (it is another model), so on adapter
// requests its guesses are those of the base: verification by the adapted model keeps the
// answer exactly that of plain decoding.
TEST(EngineSpeculativeRandom, ADraftModelOnLoraRequestsGivesPlainTokens) {
  Engine engine({.model_path = test::tiny_gqa_model(),
                 .threads = 2,
                 .kv_cache_type = KvCacheType::F32,
                 .draft_model_path = test::tiny_gqa_model()});
  load_two_adapters(engine);
  expect_speculation_changes_nothing(engine, adapter_requests(), drafted(4));
}

}  // namespace
}  // namespace pagoda
