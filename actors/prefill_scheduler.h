#pragma once
// The prefill scheduler actor: the waiting requests. It admits them, highest priority first
// and preempted ones ahead of all new work, when the page pool grants pages for every token
// they still have to feed (sliding-window groups: their first window; the steps grant the rest
// as old pages go back) and the decode scheduler has room (slot credits), then hands them
// to the decode scheduler, which cuts their prompts into prefill chunks. An admission takes
// the longest cached run of its prompt's full token blocks from the prefix cache and feeds
// only the rest (always the last token, so its step has logits). With a disk tier the hit may
// reach into blocks on disk: such an admission goes to the disk-tier actor, which reads them
// into its fresh pages and then hands it to the decode scheduler.

#include <vector>

#include "actors/actor.h"
#include "actors/messages.h"
#include "actors/page_pool_actor.h"
#include "engine/metrics/metrics_board.h"

namespace pagoda {

class PrefillScheduler : public Actor<PrefillMessage> {
 public:
  // `keep_free`: pages a new admission must leave free, so running sequences can grow.
  PrefillScheduler(std::shared_ptr<Mailbox<PrefillMessage>> mailbox, PagePoolActor& pool,
                   std::shared_ptr<Mailbox<DecodeMessage>> decode, int32_t max_running, int32_t keep_free,
                   MetricsBoard& metrics)
      : Actor(std::move(mailbox)),
        pool_(pool),
        decode_(std::move(decode)),
        credits_(max_running),
        keep_free_(keep_free),
        metrics_(metrics) {}

  // Where admissions whose hit lies partly on disk go (set before start(); none: no disk tier).
  void set_disk_mailbox(std::shared_ptr<Mailbox<DiskMessage>> disk) { disk_ = std::move(disk); }

  // Cancels what is left in the mailbox after the actor stopped (shutdown).
  void drain();

 private:
  void handle(PrefillMessage message) override;
  void enqueue(SequencePtr seq);
  void drop_cancelled();
  void admit();
  // The prefix-cache hashes an admission looks up (none when the sequence does not use the
  // cache or is swapped out), and what it does with the cached pages it got.
  std::vector<PageHash> prefix_keys(Sequence& seq);
  // The blocks of its prefix a hit covers all of or none of.
  static std::vector<WholeBlocks> whole_blocks(const Sequence& seq);
  void took_prefix(Sequence& seq, const PageGrant& grant);
  void cancel(Sequence& seq);

  PagePoolActor& pool_;
  std::shared_ptr<Mailbox<DecodeMessage>> decode_;
  std::shared_ptr<Mailbox<DiskMessage>> disk_;
  std::vector<SequencePtr> waiting_;  // in admission order
  int32_t credits_;                   // sequences the decode scheduler can take now
  int32_t keep_free_;
  uint64_t next_admit_order_ = 1;
  MetricsBoard& metrics_;
};

}  // namespace pagoda
