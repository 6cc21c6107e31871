#pragma once
// The engine's machinery, by the model's kind: a decoder's forward pass over the paged KV cache
// with its actors (page pool, prefill, decode, LoRA router, and the disk tier and KV-event
// publisher when configured), or an encoder's runner and its one scheduler. Engine::Impl owns one.

#include <memory>

#include "actors/decode_scheduler.h"
#include "actors/disk_tier_actor.h"
#include "actors/encoder_scheduler.h"
#include "actors/lora_router.h"
#include "actors/page_pool_actor.h"
#include "actors/prefill_scheduler.h"
#include "engine/events/kv_event_publisher.h"
#include "engine/forward/encoder_runner.h"
#include "engine/forward/model_runner.h"
#include "engine/forward/vision_encoder.h"
#include "engine/model/model.h"
#include "engine/speculation/draft_proposer.h"
#include "pagoda/engine_config.h"

namespace pagoda {

// A decoder's machinery: the forward pass over the paged KV cache and the four actors.
struct DecoderCore {
  DecoderCore(const EngineConfig& c, const Model& model, const VisionModel* vision_model, MetricsBoard& metrics);

  // The Stop travels router → prefill → decode → page pool, behind everything already sent;
  // each actor cancels what it holds on the way. The disk-tier actor stops last, after its
  // queued writes (they persist) and loads (their sequences go to the decode scheduler's
  // drain). What reached a mailbox after its actor stopped is cancelled by the drains, in the
  // same order, so every page comes back.
  void shutdown();

  ModelRunner runner;
  std::unique_ptr<VisionEncoder> vision;  // with EngineConfig::mmproj_path; runs in runner's arena
  PagePool pool;
  std::unique_ptr<speculation::DraftProposer> draft;  // with EngineConfig::draft_model_path
  // The schedulers post to each other, so their mailboxes exist before either of them.
  std::shared_ptr<Mailbox<PrefillMessage>> prefill_mailbox = std::make_shared<Mailbox<PrefillMessage>>();
  std::shared_ptr<Mailbox<DecodeMessage>> decode_mailbox = std::make_shared<Mailbox<DecodeMessage>>();
  PagePoolActor pool_actor;
  PrefillScheduler prefill;
  DecodeScheduler decode;
  LoraRouter router;
  std::unique_ptr<DiskTierActor> disk;  // with EngineConfig::kv_disk_path
  // With EngineConfig::kv_events_endpoint. Declared last, so destroyed first: the actors have
  // stopped by then (~Engine shuts down), and it sends what they queued.
  std::unique_ptr<KvEventPublisher> events;
};

// An encoder's: whole inputs in one pass each, no KV cache, one actor.
struct EncoderCore {
  EncoderCore(const EngineConfig& c, const Model& model, MetricsBoard& metrics);
  void shutdown();

  EncoderRunner runner;
  EncoderScheduler scheduler;
};

}  // namespace pagoda
