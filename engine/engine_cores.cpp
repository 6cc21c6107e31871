#include "engine/engine_cores.h"

#include <algorithm>
#include <string>

#include "engine/disk_tier_setup.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

int32_t kv_page_count(const EngineConfig& c, const KvLayout& layout) {
  const int32_t pages = c.kv_pages > 0 ? c.kv_pages : PagePool::pages_for_bytes(layout, c.kv_bytes);
  if (pages <= 0)
    throw Error("bad engine config: the KV budget holds no page (a page is " + std::to_string(layout.bytes_per_page()) +
                " bytes)");
  return pages;
}

}  // namespace

DecoderCore::DecoderCore(const EngineConfig& c, const Model& model, const VisionModel* vision_model,
                         MetricsBoard& metrics)
    : runner(model, c.threads, true),
      vision(vision_model ? std::make_unique<VisionEncoder>(*vision_model, runner.arena()) : nullptr),
      pool(KvLayout::for_model(model.config, c.tokens_per_page, c.kv_cache_type),
           kv_page_count(c, KvLayout::for_model(model.config, c.tokens_per_page, c.kv_cache_type)), c.kv_prefault),
      draft(c.draft_model_path.empty() ? nullptr
                                       : std::make_unique<speculation::DraftProposer>(
                                             c, model, int64_t(pool.capacity()) * c.tokens_per_page, metrics)),
      pool_actor(pool, metrics),
      // A new admission leaves 1% of the pages free so running sequences can still grow.
      prefill(prefill_mailbox, pool_actor, decode_mailbox, c.max_running, std::max(1, pool.capacity() / 100), metrics),
      decode(decode_mailbox, runner, pool.view(), pool_actor, prefill_mailbox, c, metrics, draft.get()),
      router(prefill_mailbox, c.max_resident_adapters, c.adapter_run_cap, metrics) {
  pool_actor.set_prefill_mailbox(prefill_mailbox);
  decode.set_vision(vision.get());
  if (!c.kv_events_endpoint.empty()) {
    events = std::make_unique<KvEventPublisher>(
        KvEventPublisherOptions{c.kv_events_endpoint, c.kv_events_replay_endpoint, c.kv_events_topic});
    pool_actor.set_event_sink(events.get());
  }
  if (!c.kv_disk_path.empty()) {
    auto disk_mailbox = std::make_shared<Mailbox<DiskMessage>>();
    pool_actor.set_disk_tier(open_disk_tier(c, model, pool.layout(), pool.capacity(), disk_mailbox, metrics));
    prefill.set_disk_mailbox(disk_mailbox);
    disk = std::make_unique<DiskTierActor>(disk_mailbox, c.kv_disk_path, pool_actor.disk_fingerprint(), pool.view(),
                                           pool_actor.mailbox(), prefill_mailbox, decode_mailbox, metrics);
    disk->start();
  }
  pool_actor.start();
  decode.start();
  prefill.start();
  router.start();
}

// The Stop travels router → prefill → decode → page pool, behind everything already sent;
// each actor cancels what it holds on the way. The disk-tier actor stops last, after its
// queued writes (they persist) and loads (their sequences go to the decode scheduler's
// drain). What reached a mailbox after its actor stopped is cancelled by the drains, in the
// same order, so every page comes back.
void DecoderCore::shutdown() {
  router.post(Stop{});
  router.join();
  prefill.join();
  decode.join();
  pool_actor.join();
  if (disk) {
    disk->post(Stop{});
    disk->join();
  }
  router.drain();
  prefill.drain();
  if (disk) disk->drain();
  decode.drain();
  pool_actor.drain();
}

EncoderCore::EncoderCore(const EngineConfig& c, const Model& model, MetricsBoard& metrics)
    : runner(model, c.threads, true), scheduler(runner, c, metrics) {
  scheduler.start();
}

void EncoderCore::shutdown() {
  scheduler.post(Stop{});
  scheduler.join();
  scheduler.drain();
}

}  // namespace pagoda
