#pragma once
// The page-pool actor: sole owner of the paged KV cache's accounting and prefix-cache index.
// The prefill scheduler asks it for an admission's pages (a round trip: cached prefix pages,
// then fresh ones); the decode scheduler asks for pages as sequences grow (a round trip),
// names the pages its steps filled and gives pages back (one way). When pages come back while
// the prefill scheduler waits for some, it tells it.
//
// With a disk tier it also owns the index of the page files on disk: every page it names that
// may persist and is not on disk yet is held (one more holder, so its bytes stay put) and sent
// to the disk-tier actor to be written, a bounded number at a time; the rest wait, unheld, and
// go when their turn comes if the pool still has them. An admission's hit may then take blocks
// from disk as well, which the grant lists as loads. With a KV event sink it tells
// it, after each message, what each tier stored and removed (kv_events.h).

#include <deque>
#include <memory>
#include <optional>
#include <unordered_set>
#include <vector>

#include "actors/actor.h"
#include "actors/messages.h"
#include "engine/metrics/metrics_board.h"
#include "engine/kv/disk_page_index.h"
#include "engine/kv/kv_events.h"
#include "engine/kv/page_pool.h"

namespace pagoda {

class PagePoolActor : public Actor<PageMessage> {
 public:
  PagePoolActor(PagePool& pool, MetricsBoard& metrics) : pool_(pool), metrics_(metrics) { publish(); }

  void set_prefill_mailbox(std::shared_ptr<Mailbox<PrefillMessage>> prefill) { prefill_ = std::move(prefill); }

  // The disk tier: what is on disk (`index`, filled from a scan), the engine's fingerprint, the
  // disk-tier actor's mailbox, and how many pages may wait to be written at once. Set before
  // start().
  struct DiskTier {
    DiskPageIndex index;
    PageHash fingerprint;
    std::shared_ptr<Mailbox<DiskMessage>> mailbox;
    int32_t max_backlog = 64;
  };
  void set_disk_tier(std::unique_ptr<DiskTier> disk) {
    disk_ = std::move(disk);
    publish();
  }
  const PageHash& disk_fingerprint() const { return disk_->fingerprint; }
  // Where the KV events go (null: nowhere). Set before start(); the sink outlives the actor.
  void set_event_sink(KvEventSink* sink);

  // Asks for `count` pages, leaving at least `keep_free` available; blocks for the answer.
  // Called from the schedulers' threads.
  std::optional<std::vector<int32_t>> allocate(int32_t count, int32_t keep_free, PageRequester requester);

  // An admission's pages for positions up to `to`, computing from `from` on or past the
  // longest hit of `prefix` in the prefix cache that ends outside each of `whole`
  // (messages.h: PageGrant, WholeBlocks); nullopt (and the prefill scheduler is told when pages
  // come back) when fewer than they + `keep_free` are available. Blocks for the answer.
  std::optional<PageGrant> admit(std::vector<PageHash> prefix, std::vector<WholeBlocks> whole, int32_t from, int32_t to,
                                 int32_t keep_free, bool disk_tier = false);

  void release(std::vector<int32_t> pages) {
    if (!pages.empty()) post(ReleasePages{std::move(pages)});
  }
  void register_pages(std::vector<NamedPage> pages) {
    if (!pages.empty()) post(RegisterPages{std::move(pages)});
  }

  // The page layout (fixed at start-up, so any thread may read it).
  const KvLayout& layout() const { return pool_.layout(); }

  // Handles what is left in the mailbox after the actor stopped (shutdown).
  void drain();

 private:
  void handle(PageMessage message) override;
  void grant(AdmitPages& request);
  // Names a filled page, and offers it to the disk tier.
  void name(NamedPage& page);
  void written(PageWritten& w);
  // Sends waiting pages to be written while the backlog has room.
  void write_waiting();
  void forget_damaged(const PageFilesDamaged& d);
  void pages_came_back();
  void note_stored(const NamedPage& page, KvTier tier);
  void note_removed(const PageHash& hash, int32_t group, KvTier tier);
  // Updates the metrics board and sends the events this message made.
  void publish();

  PagePool& pool_;
  MetricsBoard& metrics_;
  std::shared_ptr<Mailbox<PrefillMessage>> prefill_;
  bool prefill_waiting_ = false;
  std::unique_ptr<DiskTier> disk_;
  std::unordered_set<PageFileName, PageFileNameHasher> writing_;  // sent to be written, not yet back
  std::deque<NamedPage> to_write_;                                // named, waiting for room in the backlog
  int64_t writes_skipped_ = 0;
  int64_t disk_evictions_ = 0;
  bool draining_ = false;  // shutting down: no new writes
  KvEventSink* events_ = nullptr;
  std::vector<KvEvent> pending_events_;
};

}  // namespace pagoda
