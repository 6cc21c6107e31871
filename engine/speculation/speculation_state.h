#pragma once
// What one sequence carries for speculative decoding: its settings, the adaptive draft
// length, this step's rows, and the draft model's cache of it.

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/kv/block_table.h"

#include "engine/speculation/draft_length.h"
#include "pagoda/speculative.h"

namespace pagoda::speculation {

struct SpeculationState {
  explicit SpeculationState(const SpeculativeParams& p) : params(p), length(p) {}

  bool enabled() const { return params.mode != SpeculativeMode::None; }
  // The guesses of this step's entry (empty when it decodes plainly).
  std::span<const int32_t> guesses() const {
    return rows.empty() ? std::span<const int32_t>() : std::span<const int32_t>(rows).subspan(1);
  }

  SpeculativeParams params;
  DraftLength length;
  std::vector<int32_t> rows;  // this step's entry when it speculates: the last token, then the guesses
  int32_t draft_wanted = 0;   // guesses asked of the draft model in this step (Draft mode)

  // The draft model's cache of this sequence (Draft mode): the tokens whose K/V it holds,
  // position by position, and their pages in the draft's pool (draft_proposer.h). Made on
  // the first draft; emptied when the sequence ends or is preempted. While the draft probes
  // (SpeculativeParams::draft_probe) it skips the `draft_skipped` tokens after the first:
  // its position p holds token p + draft_skipped for p >= 1.
  std::vector<int32_t> draft_tokens;
  std::optional<BlockTable> draft_table;
  int32_t draft_skipped = 0;
  std::vector<int32_t> draft_feed;  // a probe's first feed: the first token, then the tail
};

}  // namespace pagoda::speculation
