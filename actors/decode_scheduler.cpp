#include "actors/decode_scheduler.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <utility>

#include <tbb/parallel_for.h>

#include "engine/request/rank_scoring.h"
#include "engine/sampling/logprobs.h"
#include "engine/speculation/proposer.h"

namespace pagoda {

DecodeScheduler::DecodeScheduler(std::shared_ptr<Mailbox<DecodeMessage>> mailbox, ModelRunner& runner, KvView kv,
                                 PagePoolActor& pool, std::shared_ptr<Mailbox<PrefillMessage>> prefill,
                                 const EngineConfig& config, MetricsBoard& metrics, speculation::DraftProposer* draft)
    : Actor(std::move(mailbox)),
      runner_(runner),
      kv_(kv),
      pool_(pool),
      prefill_(std::move(prefill)),
      config_(config),
      metrics_(metrics),
      draft_(draft),
      image_rows_(size_t(256) << 20),
      tokenizer_(runner.model().tokenizer),
      planner_(config) {}

void DecodeScheduler::run() {
  step_loop([&] { return running_.empty(); }, [&] { step(); });
}

void DecodeScheduler::handle(DecodeMessage message) {
  if (auto* a = std::get_if<Admitted>(&message)) {
    Sequence& seq = *a->seq;
    if (!seq.swapped_kv.empty()) {
      // Swap in: the live pages' contents come back from host memory, page for page.
      const size_t page_bytes = kv_.layout.bytes_per_page();
      const std::vector<int32_t> live = seq.table.live_pages(seq.n_cached);
      for (size_t i = 0; i < live.size(); ++i) {
        std::memcpy(kv_.page(live[i]), seq.swapped_kv.data() + i * page_bytes, page_bytes);
      }
      seq.swapped_kv = {};
    }
    running_.push_back(std::move(a->seq));
    metrics_.running.fetch_add(1, std::memory_order_relaxed);
  } else if (std::holds_alternative<Stop>(message)) {
    for (SequencePtr& seq : running_) retire(*seq, FinishReason::Cancelled);
    running_.clear();
    pool_.post(Stop{});
    stop();
  }
  // Wake: the cancel flags are read at the start of every step.
}

void DecodeScheduler::step() {
  const auto start = Clock::now();
  for (SequencePtr& seq : running_) {
    if (seq->cancel_requested()) retire(*seq, FinishReason::Cancelled);
  }
  remove_finished();

  std::vector<Planned>& planned = planned_;
  if (plan(planned)) {
    encode_images(planned);
    batch_.entries.clear();
    for (const Planned& p : planned) {
      Sequence& s = *p.seq;
      if (s.image_grids.size() != s.images.size()) {
        s.image_grids.clear();
        for (const SequenceImage& image : s.images)
          s.image_grids.push_back({image.position, image.grid_rows, image.grid_cols});
      }
      if (!s.spec.rows.empty()) {  // a speculating decode: a logits row for every guess too
        batch_.entries.push_back({s.spec.rows, s.n_cached, &s.table, true, s.lora.get(), true});
        batch_.entries.back().image_grids = s.image_grids;
        continue;
      }
      if (s.embedding) {  // its rows of final hidden states, as its pooling needs them
        const EmbeddingPooler::Rows rows = s.embedding->rows_for(s.n_cached, p.n_tokens);
        batch_.entries.push_back({std::span<const int32_t>(s.tokens).subspan(s.n_cached, p.n_tokens), s.n_cached,
                                  &s.table, rows.last, s.lora.get(), rows.all, true});
        continue;
      }
      const bool last_chunk = s.n_cached + p.n_tokens == int32_t(s.tokens.size());
      const bool scoring = s.prompt_logprobs >= 0 && s.n_cached < s.prompt_len;
      batch_.entries.push_back({std::span<const int32_t>(s.tokens).subspan(s.n_cached, p.n_tokens), s.n_cached,
                                &s.table, last_chunk, s.lora.get(), scoring});
      batch_.entries.back().embeddings = s.image_runs;
      batch_.entries.back().image_grids = s.image_grids;
    }
    try {
      runner_.forward(batch_, kv_, logits_, hidden_);
      process_outputs(planned, logits_);
    } catch (const std::exception& e) {
      for (const Planned& p : planned) {
        if (p.seq->status != SequenceStatus::Finished) retire(*p.seq, FinishReason::Error, e.what());
      }
    }
    remove_finished();
  }
  if (slots_to_return_ > 0) {
    prefill_->post(SlotsFreed{slots_to_return_});
    slots_to_return_ = 0;
  }
  metrics_.busy_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count(),
                             std::memory_order_relaxed);
}

bool DecodeScheduler::plan(std::vector<Planned>& planned) {
  bool speculate = true;
  for (;;) {
    planned.clear();
    if (running_.empty()) return false;
    views_.clear();
    for (const SequencePtr& seq : running_) views_.push_back(scheduling::view_of(*seq));
    planner_.plan_entries(views_, turn_++, speculate, plan_);
    if (plan_.entries.empty()) return false;
    for (const scheduling::PlannedEntry& e : plan_.entries) running_[e.sequence]->spec.rows.clear();
    propose_guesses();
    if (auto pages = pool_.allocate(plan_.pages, 0, PageRequester::Decode)) {
      std::span<const int32_t> next(*pages);
      for (const scheduling::PlannedEntry& e : plan_.entries) {
        Sequence& seq = *running_[e.sequence];
        seq.table.grow(seq.n_cached, seq.n_cached + e.n_tokens, next.first(size_t(e.pages)));
        next = next.subspan(size_t(e.pages));
        planned.push_back({&seq, e.n_tokens});
      }
      return true;
    }
    const scheduling::Relief relief = scheduling::StepPlanner::make_room(plan_, running_.size());
    if (relief.drop_speculation) {
      speculate = false;
      continue;
    }
    SequencePtr victim = std::move(running_[relief.victim]);
    running_.erase(running_.begin() + ptrdiff_t(relief.victim));
    preempt(std::move(victim));
  }
}

void DecodeScheduler::encode_images(std::vector<Planned>& planned) {
  if (!vision_) return;
  struct Wanted {
    Sequence* seq;
    size_t image;
    size_t input;  // its entry in inputs
  };
  std::vector<Wanted> wanted;
  std::vector<const PixelPlanes*> inputs;
  std::vector<uint64_t> input_hashes;
  for (const Planned& p : planned) {
    Sequence& s = *p.seq;
    bool changed = false;
    for (size_t i = 0; i < s.images.size(); ++i) {
      SequenceImage& image = s.images[i];
      const bool fed = image.position < s.n_cached + p.n_tokens && image.position + image.tokens > s.n_cached;
      if (image.rows || !fed) continue;
      if ((image.rows = image_rows_.find(image.hash))) {
        changed = true;
        continue;
      }
      // Equal images in one step are encoded once.
      const auto same = std::find(input_hashes.begin(), input_hashes.end(), image.hash);
      const size_t input = size_t(same - input_hashes.begin());
      if (same == input_hashes.end()) {
        inputs.push_back(image.pixels.get());
        input_hashes.push_back(image.hash);
      }
      wanted.push_back({&s, i, input});
    }
    if (changed) s.image_runs.clear();
  }
  if (!inputs.empty()) {
    std::vector<float> out;
    std::vector<int32_t> tokens;
    try {
      vision_->encode(inputs, out, tokens);
    } catch (const std::exception& e) {
      for (const Wanted& w : wanted) {
        if (w.seq->status != SequenceStatus::Finished) retire(*w.seq, FinishReason::Error, e.what());
      }
      std::erase_if(planned, [](const Planned& p) { return p.seq->status == SequenceStatus::Finished; });
      return;
    }
    const size_t width = size_t(vision_->config().projection_dim);
    std::vector<ImageRowCache::Rows> rows;
    size_t at = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const size_t n = size_t(tokens[i]) * width;
      rows.push_back(
          std::make_shared<const std::vector<float>>(out.begin() + ptrdiff_t(at), out.begin() + ptrdiff_t(at + n)));
      image_rows_.insert(input_hashes[i], rows.back());
      at += n;
    }
    for (const Wanted& w : wanted) {
      SequenceImage& image = w.seq->images[w.image];
      if (rows[w.input]->size() != size_t(image.tokens) * width) {  // the preprocessor and encoder disagree
        if (w.seq->status != SequenceStatus::Finished)
          retire(*w.seq, FinishReason::Error, "the vision encoder gave an image another token count than planned");
        continue;
      }
      image.rows = rows[w.input];
      image.pixels.reset();  // the rows are kept until the sequence finishes
      w.seq->image_runs.clear();
    }
  }
  std::erase_if(planned, [](const Planned& p) { return p.seq->status == SequenceStatus::Finished; });
  for (const Planned& p : planned) {
    Sequence& s = *p.seq;
    if (!s.image_runs.empty()) continue;
    for (const SequenceImage& image : s.images) {
      if (image.rows) s.image_runs.push_back({image.position, image.tokens, image.rows->data(), image.bidirectional});
    }
  }
}

void DecodeScheduler::propose_guesses() {
  if (plan_.guess_budget == 0) return;  // nobody guesses in this step
  drafting_.clear();
  scheduling::StepPlanner::hand_out_guesses(plan_, [&](size_t entry, int32_t limit) {
    Sequence& seq = *running_[plan_.entries[entry].sequence];
    const int32_t asked = speculation::propose(seq.spec, seq.tokens, limit, seq.max_new_tokens - seq.generated());
    if (seq.spec.draft_wanted > 0) drafting_.push_back({&seq.spec, seq.tokens});
    return asked;
  });
  // The draft model guesses for all its sequences in the same passes (the engine refuses
  // Draft-mode requests without one).
  if (!drafting_.empty()) draft_->propose(drafting_);
  for (size_t i = 0; i < plan_.decodes; ++i) {
    const auto guesses = int32_t(running_[plan_.entries[i].sequence]->spec.guesses().size());
    if (guesses > 0) scheduling::StepPlanner::set_guesses(views_, plan_, i, guesses);
  }
}

void DecodeScheduler::preempt(SequencePtr victim) {
  Sequence& seq = *victim;
  if (config_.preemption == PreemptionMode::Swap && seq.n_cached > 0) {
    // Pages are copied as bytes of the layout's size, whatever the cache's element type; only
    // the live ones (a sliding group's holes come back as holes).
    const size_t page_bytes = kv_.layout.bytes_per_page();
    const std::vector<int32_t> live = seq.table.live_pages(seq.n_cached);
    seq.swapped_kv.resize(live.size() * page_bytes);
    for (size_t i = 0; i < live.size(); ++i) {
      std::memcpy(seq.swapped_kv.data() + i * page_bytes, kv_.page(live[i]), page_bytes);
    }
  } else {
    seq.n_cached = 0;  // recompute: every token is fed again
  }
  pool_.release(seq.table.take_pages());
  if (draft_) draft_->release(seq.spec);  // recomputed when it drafts again
  seq.requeued = true;
  ++seq.preemptions;
  metrics_.preempted.fetch_add(1, std::memory_order_relaxed);
  metrics_.running.fetch_sub(1, std::memory_order_relaxed);
  metrics_.queued.fetch_add(1, std::memory_order_relaxed);
  prefill_->post(Requeue{std::move(victim)});
}

void DecodeScheduler::process_outputs(const std::vector<Planned>& planned, const std::vector<float>& logits) {
  const size_t vocab = size_t(runner_.config().vocab_size);
  sampling_.clear();
  scoring_.clear();
  embedded_.clear();
  size_t row = 0;         // rows come in entry order: every token's for all_logits, else the last's
  size_t hidden_row = 0;  // the same for the hidden entries' rows, in hidden_
  for (size_t i = 0; i < planned.size(); ++i) {
    Sequence& seq = *planned[i].seq;
    const BatchEntry& entry = batch_.entries[i];
    if (entry.hidden) {
      hidden_row = pool_rows(seq, entry, hidden_row);
      if (seq.n_cached == int32_t(seq.tokens.size())) embedded_.push_back(&seq);
      continue;
    }
    if (seq.status == SequenceStatus::Decoding) {
      // Its rows are verified below; n_cached moves past what they accept.
      sampling_.push_back({&seq, row, true, false});
      row += entry.all_logits ? entry.tokens.size() : 1;
      continue;
    }
    const int32_t first = seq.n_cached;
    seq.n_cached += planned[i].n_tokens;
    if (entry.all_logits) {
      // Row j predicts the token at first + j + 1. A prompt recomputed after a preemption
      // finds its tokens already scored.
      for (int32_t j = 0; j < planned[i].n_tokens; ++j) {
        const int32_t index = first + j;
        if (index + 1 < seq.prompt_len && index == int32_t(seq.prompt_logprobs_out.size())) {
          seq.prompt_logprobs_out.emplace_back();
          scoring_.push_back({&seq, index, row + size_t(j)});
        }
      }
      row += size_t(planned[i].n_tokens);
    } else if (entry.needs_logits) {
      ++row;
    }
    collect_filled(seq);
    if (seq.n_cached < int32_t(seq.tokens.size())) continue;  // more prompt to come
    seq.status = SequenceStatus::Decoding;
    sampling_.push_back({&seq, row - 1, false, seq.max_new_tokens == 0});
  }
  // Each sequence samples with its own generator, so the rows are sampled side by side on the
  // compute threads; streaming and stop rules then run here, in order.
  runner_.arena().execute([&] {
    tbb::parallel_for(size_t(0), sampling_.size() + scoring_.size(), [&](size_t i) {
      if (i >= sampling_.size()) {
        const Scored& s = scoring_[i - sampling_.size()];
        const std::span<const float> row(logits.data() + s.row * vocab, vocab);
        const int32_t next = s.seq->tokens[size_t(s.index) + 1];
        s.seq->prompt_logprobs_out[size_t(s.index)] = token_logprobs(row, next, s.seq->prompt_logprobs);
        return;
      }
      const Sampled& s = sampling_[i];
      if (s.score_only) return;
      const size_t rows = s.seq->spec.guesses().size() + 1;
      s.seq->sample(std::span<const float>(logits).subspan(s.row * vocab, rows * vocab), vocab);
    });
  });
  for (const Sampled& s : sampling_) {
    if (s.decode) keep_accepted(*s.seq);
  }
  // Named before any of these sequences can finish and release its pages.
  pool_.register_pages(std::exchange(filled_, {}));
  // Their prompt is in: the future resolves with the embedding (Sequence::finish).
  score_rank_pairs(
      embedded_, size_t(runner_.config().dim),
      [&](const float* rows, int32_t n, float* scores) { runner_.rank_scores(rows, n, scores); }, rank_rows_,
      rank_scores_);
  for (Sequence* seq : embedded_) retire(*seq, FinishReason::Length);
  for (const Sampled& s : sampling_) {
    Sequence& seq = *s.seq;
    if (s.score_only) {
      retire(seq, FinishReason::Length);
      continue;
    }
    // Emitted one by one as plain decoding would, so a stop rule ends the run where it ends
    // plain decoding; what was sampled after it is dropped.
    const size_t first = seq.tokens.size() - size_t(seq.sampled.sampled);
    const std::vector<int32_t> sampled(seq.tokens.begin() + ptrdiff_t(first), seq.tokens.end());
    seq.tokens.resize(first);
    for (size_t j = 0; j < sampled.size() && seq.status != SequenceStatus::Finished; ++j) {
      if (sampled[j] < 0) {
        retire(seq, FinishReason::Stop);  // its grammar is complete and cannot end otherwise
        break;
      }
      std::optional<TokenLogprobs> logprobs;
      if (seq.logprobs >= 0) logprobs = std::move(seq.sampled.logprobs[j]);
      append_token(seq, sampled[j], std::move(logprobs));
    }
    // The draft forgets the guesses it was fed that were rejected (or dropped by a stop rule).
    if (draft_ && seq.status != SequenceStatus::Finished && !seq.spec.draft_tokens.empty()) {
      draft_->rollback({&seq.spec, seq.tokens});
    }
  }
  // Sliding-window groups give back the pages no later query sees (after they were named).
  for (const Planned& p : planned) {
    if (p.seq->status != SequenceStatus::Finished) pool_.release(p.seq->table.take_dead_pages(p.seq->n_cached));
  }
}

size_t DecodeScheduler::pool_rows(Sequence& seq, const BatchEntry& entry, size_t hidden_row) {
  const auto dim = size_t(runner_.config().dim);
  const int32_t first = seq.n_cached;
  const auto n = int32_t(entry.tokens.size());
  seq.n_cached += n;
  auto row = [&](size_t r) { return std::span<const float>(hidden_).subspan(r * dim, dim); };
  if (entry.all_logits) {
    for (int32_t j = 0; j < n; ++j) seq.embedding->add(first + j, row(hidden_row + size_t(j)));
    hidden_row += size_t(n);
  } else if (entry.needs_logits) {
    seq.embedding->add(first + n - 1, row(hidden_row++));
  }
  collect_filled(seq);
  return hidden_row;
}

void DecodeScheduler::keep_accepted(Sequence& seq) {
  speculation::SpeculationState& spec = seq.spec;
  const auto guesses = int32_t(spec.guesses().size());
  // The fed token and the accepted guesses keep their K/V; the pages only rejected guesses
  // reached go back to the pool.
  seq.n_cached += 1 + seq.sampled.accepted;
  pool_.release(seq.table.take_pages_beyond(seq.n_cached));
  if (guesses > 0) {
    spec.length.record(guesses, seq.sampled.accepted);
    metrics_.speculative_proposed.fetch_add(guesses, std::memory_order_relaxed);
    metrics_.speculative_accepted.fetch_add(seq.sampled.accepted, std::memory_order_relaxed);
    // A draft that gave up reads no more of this sequence: its cache goes back now.
    if (spec.length.gave_up() && draft_) draft_->release(spec);
  }
  collect_filled(seq);
}

void DecodeScheduler::collect_filled(Sequence& seq) {
  if (seq.prefix_cache) {
    seq.prefix.collect_full(seq.tokens, seq.n_cached, seq.table, filled_, seq.adapter.empty());
  }
}

void DecodeScheduler::append_token(Sequence& seq, int32_t token, std::optional<TokenLogprobs> logprobs) {
  const auto now = Clock::now();
  if (seq.generated() == 0) seq.first_token = now;
  seq.last_token = now;
  seq.tokens.push_back(token);
  metrics_.generated_tokens.fetch_add(1, std::memory_order_relaxed);

  const bool eos = !seq.ignore_eos && tokenizer_.is_eog(token);
  const bool stop_id =
      std::find(seq.stop_token_ids.begin(), seq.stop_token_ids.end(), token) != seq.stop_token_ids.end();
  if (logprobs) seq.logprobs_out.push_back(*logprobs);
  // A stop token's text is not part of the output.
  seq.emit({token, eos || stop_id ? std::string() : seq.output.append(token), std::move(logprobs)});
  if (!seq.callback_error.empty()) {
    retire(seq, FinishReason::Error, seq.callback_error);
  } else if (eos || stop_id) {
    retire(seq, eos ? FinishReason::Eos : FinishReason::Stop);
  } else if (seq.output.stopped()) {
    retire(seq, FinishReason::Stop);
  } else if (seq.generated() >= seq.max_new_tokens) {
    retire(seq, FinishReason::Length);
  }
}

void DecodeScheduler::retire(Sequence& seq, FinishReason reason, std::string error) {
  pool_.release(seq.table.take_pages());
  if (draft_) draft_->release(seq.spec);
  ++slots_to_return_;
  // Counted before the future resolves, so a caller who saw it resolve sees the counts too.
  metrics_.running.fetch_sub(1, std::memory_order_relaxed);
  metrics_.finished.fetch_add(1, std::memory_order_relaxed);
  seq.finish(reason, std::move(error));
}

void DecodeScheduler::remove_finished() {
  std::erase_if(running_, [](const SequencePtr& s) { return s->status == SequenceStatus::Finished; });
}

void DecodeScheduler::drain() {
  while (auto m = mailbox_->try_receive()) {
    if (auto* a = std::get_if<Admitted>(&*m)) {
      metrics_.running.fetch_add(1, std::memory_order_relaxed);
      retire(*a->seq, FinishReason::Cancelled);
    }
  }
}

}  // namespace pagoda
