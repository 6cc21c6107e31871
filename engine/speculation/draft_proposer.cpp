#include "engine/speculation/draft_proposer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/speculation/proposer.h"
#include "pagoda/error.h"

namespace pagoda::speculation {

namespace {

// Guessing from other token ids would be meaningless, so the draft must spell every token
// the same way as the model it drafts for.
void check_same_vocabulary(const Model& draft, const Model& target) {
  const auto& d = draft.tokenizer.vocab().tokens;
  const auto& t = target.tokenizer.vocab().tokens;
  const std::string both = "the draft model " + draft.path + " and the model " + target.path;
  if (d.size() != t.size() || draft.config.vocab_size != target.config.vocab_size) {
    throw Error(both + " have different vocabularies (" + std::to_string(draft.config.vocab_size) + " vs " +
                std::to_string(target.config.vocab_size) + " tokens)");
  }
  const auto diff = std::mismatch(d.begin(), d.end(), t.begin());
  if (diff.first != d.end()) {
    const auto id = diff.first - d.begin();
    throw Error(both + " have different vocabularies (token " + std::to_string(id) + " is '" + *diff.first + "' vs '" +
                *diff.second + "')");
  }
}

Model load_draft(const EngineConfig& c, const Model& target) {
  Model draft = load_model(c.draft_model_path, "", c.use_mmap ? MappedFile::Load::Map : MappedFile::Load::Copy);
  check_same_vocabulary(draft, target);
  return draft;
}

int32_t draft_pages(const EngineConfig& c, const KvLayout& layout, int64_t target_positions) {
  if (c.draft_kv_pages > 0) return c.draft_kv_pages;
  return int32_t((target_positions + layout.tokens_per_page - 1) / layout.tokens_per_page * layout.n_groups());
}

// Positions of `s`'s context in the draft: its tokens, less those skipped while probing.
int32_t draft_length(const DraftingSequence& s) { return int32_t(s.tokens.size()) - s.spec->draft_skipped; }

// Where draft position p is in the sequence's tokens: the first token, then the tail read
// past the skipped ones.
size_t token_index(const DraftingSequence& s, int32_t p) { return size_t(p == 0 ? 0 : p + s.spec->draft_skipped); }

// The sequence's token at draft position p.
int32_t token_at(const DraftingSequence& s, int32_t p) { return s.tokens[token_index(s, p)]; }

// How many of the draft's cached positions still hold the sequence's tokens.
int32_t agreement(const DraftingSequence& s) {
  const std::vector<int32_t>& fed = s.spec->draft_tokens;
  const int32_t n = std::min(int32_t(fed.size()), draft_length(s));
  for (int32_t p = 0; p < n; ++p) {
    if (fed[size_t(p)] != token_at(s, p)) return p;
  }
  return n;
}

// `n` of the sequence's tokens from draft position `from` on, as the draft reads them; a
// probe's first feed joins the first token to the tail, in SpeculationState::draft_feed.
std::span<const int32_t> feed_from(const DraftingSequence& s, int32_t from, int32_t n) {
  SpeculationState& spec = *s.spec;
  if (from > 0 || spec.draft_skipped == 0) {
    return s.tokens.subspan(token_index(s, from), size_t(n));
  }
  const auto tail = s.tokens.begin() + 1 + spec.draft_skipped;
  spec.draft_feed.assign(1, s.tokens.front());
  spec.draft_feed.insert(spec.draft_feed.end(), tail, tail + (n - 1));
  return spec.draft_feed;
}

}  // namespace

DraftProposer::DraftProposer(const EngineConfig& config, const Model& target, int64_t target_positions,
                             MetricsBoard& metrics)
    : model_(load_draft(config, target)),
      runner_(model_, config.threads, true),
      pool_(KvLayout::for_model(model_.config, config.tokens_per_page, config.kv_cache_type),
            draft_pages(config, KvLayout::for_model(model_.config, config.tokens_per_page, config.kv_cache_type),
                        target_positions)),
      metrics_(metrics),
      chunk_(config.prefill_chunk) {
  publish();
}

void DraftProposer::propose(std::span<const DraftingSequence> seqs) {
  active_.clear();
  for (const DraftingSequence& s : seqs) {
    SpeculationState& spec = *s.spec;
    if (!spec.draft_table) spec.draft_table.emplace(pool_.layout());
    // A draft that earned trust while probing reads the whole context from now on.
    if (spec.length.trusted() && spec.draft_skipped > 0) release(spec);
    if (spec.draft_tokens.empty()) {
      const int32_t probe = spec.length.trusted() ? 0 : spec.params.draft_probe;
      spec.draft_skipped = probe > 0 ? std::max(0, int32_t(s.tokens.size()) - 1 - probe) : 0;
    }
    const int32_t len = draft_length(s);
    // What the cache agrees with stays, less the last token, which is fed again for its logits.
    truncate(spec, std::min(agreement(s), len - 1));
    // The tokens, then every guess but the last, which is never fed.
    const int32_t positions = len + spec.draft_wanted - 1;
    if (positions > model_.config.context_length || !spec.draft_table->reserve(positions, pool_)) {
      spec.rows.clear();
      continue;
    }
    active_.push_back(s);
  }
  publish();
  try {
    // Catching up (a new sequence's prompt, or what was decoded while it did not draft): one
    // chunk per step without logits, as a prompt is prefilled, so that a long prompt does not
    // stall the step; such a sequence decodes plainly until the rest fits in the first pass.
    batch_.entries.clear();
    going_.clear();
    for (const DraftingSequence& s : active_) {
      const auto fed = int32_t(s.spec->draft_tokens.size());
      if (draft_length(s) - fed <= chunk_) continue;
      batch_.entries.push_back({feed_from(s, fed, chunk_), fed, &*s.spec->draft_table, false, nullptr, false});
      going_.push_back(s);
    }
    if (!going_.empty()) {
      runner_.forward(batch_, pool_.view(), logits_);
      for (size_t i = 0; i < going_.size(); ++i) {
        SpeculationState& spec = *going_[i].spec;
        const std::span<const int32_t> fed = batch_.entries[i].tokens;
        spec.draft_tokens.insert(spec.draft_tokens.end(), fed.begin(), fed.end());
        spec.rows.clear();
      }
      std::erase_if(active_, [](const DraftingSequence& s) { return s.spec->rows.empty(); });
    }
    // Then one pass per guess: each sequence feeds the rest of its tokens, then its latest
    // guess, and takes the draft's most likely next token as the next guess.
    going_ = active_;
    const size_t vocab = size_t(model_.config.vocab_size);
    while (!going_.empty()) {
      batch_.entries.clear();
      for (const DraftingSequence& s : going_) {
        SpeculationState& spec = *s.spec;
        const auto fed = int32_t(spec.draft_tokens.size());
        const std::span<const int32_t> feed = spec.rows.size() > 1 ? std::span<const int32_t>(spec.rows).last(1)
                                                                   : feed_from(s, fed, draft_length(s) - fed);
        batch_.entries.push_back({feed, fed, &*spec.draft_table, true, nullptr, false});
      }
      runner_.forward(batch_, pool_.view(), logits_);
      size_t kept = 0;
      for (size_t i = 0; i < going_.size(); ++i) {
        const DraftingSequence s = going_[i];
        SpeculationState& spec = *s.spec;
        const std::span<const int32_t> fed = batch_.entries[i].tokens;
        spec.draft_tokens.insert(spec.draft_tokens.end(), fed.begin(), fed.end());
        const float* row = logits_.data() + i * vocab;
        const auto best = int32_t(std::max_element(row, row + vocab) - row);
        if (spec.params.draft_p_min > 0.0f) {
          double sum = 0.0;
          for (size_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - double(row[best]));
          if (1.0 / sum < double(spec.params.draft_p_min)) continue;  // too unsure: stop here
        }
        spec.rows.push_back(best);
        if (int32_t(spec.guesses().size()) < spec.draft_wanted) going_[kept++] = s;
      }
      going_.resize(kept);
    }
  } catch (const std::exception&) {
    // The draft failed (say its file changed under the mapping): its caches are garbage, so
    // they are dropped, and this step decodes plainly; the model's own step decides errors.
    for (const DraftingSequence& s : active_) {
      release(*s.spec);
      s.spec->rows.clear();
    }
    active_.clear();
  }
  for (const DraftingSequence& s : active_) {
    SpeculationState& spec = *s.spec;
    drop_short_guess(spec);
    // Drafted but too unsure to guess (draft_p_min, draft_min): as fruitless as a rejected
    // guess, so it counts toward the pauses and the giving up.
    if (spec.guesses().empty()) {
      spec.length.record(spec.draft_wanted, 0);
      if (spec.length.gave_up()) release(spec);
    }
  }
}

void DraftProposer::rollback(const DraftingSequence& seq) {
  truncate(*seq.spec, agreement(seq));
  publish();
}

void DraftProposer::release(SpeculationState& spec) {
  spec.draft_tokens.clear();
  if (spec.draft_table) pool_.release(spec.draft_table->take_pages());
  publish();
}

void DraftProposer::truncate(SpeculationState& spec, int32_t n) {
  if (int32_t(spec.draft_tokens.size()) > n) spec.draft_tokens.resize(size_t(n));
  if (spec.draft_table) pool_.release(spec.draft_table->take_pages_beyond(n));
}

void DraftProposer::publish() {
  metrics_.draft_pages_used.store(pool_.used_pages(), std::memory_order_relaxed);
  metrics_.draft_pages_total.store(pool_.capacity(), std::memory_order_relaxed);
}

}  // namespace pagoda::speculation
