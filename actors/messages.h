#pragma once
// The messages the actors exchange. Each actor's mailbox takes one variant; a Sequence
// travels inside a message, so only its current holder can touch it.
//
//   Engine::submit ──NewRequest──▶ LoraRouter ──NewRequest──▶ PrefillScheduler
//   Engine::load/unload_adapter ──Register/UnregisterAdapter (reply)──▶ LoraRouter
//   any finisher of an adapter request ──AdapterDone──▶ LoraRouter
//   PrefillScheduler ──Admitted──▶ DecodeScheduler ──Requeue / SlotsFreed──▶ PrefillScheduler
//   PrefillScheduler ──AdmitPages (reply)──▶ PagePoolActor
//   DecodeScheduler ──AllocatePages (reply) / RegisterPages / ReleasePages──▶ PagePoolActor
//   PagePoolActor ──PagesFreed──▶ PrefillScheduler
//   With a disk tier (EngineConfig::kv_disk_path):
//   PagePoolActor ──WritePage / RemovePageFiles──▶ DiskTierActor ──PageWritten / PageFilesDamaged──▶ PagePoolActor
//   PrefillScheduler ──LoadPages──▶ DiskTierActor ──Admitted──▶ DecodeScheduler
//                                                  (or, when a file was bad: ReleasePages, then Requeue)
//   RequestHandle::cancel ──Wake──▶ Prefill/DecodeScheduler;  Engine::shutdown ──Stop──▶ ...
//   An encoder model has none of those: Engine::submit ──NewRequest──▶ EncoderScheduler, and
//   cancel and shutdown post it Wake and Stop.

#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "actors/reply.h"
#include "engine/kv/page_file.h"
#include "engine/lora/lora_adapter.h"
#include "engine/request/sequence.h"

namespace pagoda {

struct NewRequest {
  SequencePtr seq;
};
struct Admitted {
  SequencePtr seq;  // holds pages for every token it still has to feed (sliding groups: their first window)
};
struct Requeue {
  SequencePtr seq;  // preempted: its slot is free again, it waits ahead of new work
};
struct SlotsFreed {
  int32_t count = 0;  // sequences that finished: room for as many admissions
};
struct PagesFreed {};
struct Wake {};  // something was cancelled: look at the cancel flags

// Adapter registry changes, from Engine::load_adapter / unload_adapter; the reply is an
// error message, empty on success.
struct RegisterAdapter {
  std::string name;
  std::shared_ptr<const LoraAdapter> adapter;
  std::shared_ptr<Reply<std::string>> reply;
};
struct UnregisterAdapter {
  std::string name;
  std::shared_ptr<Reply<std::string>> reply;
};
struct AdapterDone {
  std::string name;  // a request on this adapter finished: one fewer in flight
};
struct Stop {};  // shut down: cancel what you hold and pass the Stop on

enum class PageRequester { Prefill, Decode };
struct AllocatePages {
  int32_t count = 0;
  int32_t keep_free = 0;  // refuse unless this many pages stay free afterwards
  PageRequester requester = PageRequester::Decode;
  std::shared_ptr<Reply<std::optional<std::vector<int32_t>>>> reply;
};
struct ReleasePages {
  std::vector<int32_t> pages;  // one block table's, group after group in order (released last first)
};
// A page of an admission's hit that the disk tier holds and the pool did not: a fresh page
// to read it into.
struct PageLoad {
  int32_t page = 0;
  int32_t group = 0;
  int32_t block = 0;  // the token block's index in the sequence
};
// An admission's pages, group after group (BlockTable::grow with Reach::Admission from the
// first position to compute): in each group the pages of the longest prefix-cache hit of
// `prefix` (the hashes of the token blocks before the prompt's last token), then fresh ones.
struct PageGrant {
  std::vector<int32_t> pages;
  int32_t cached_blocks = 0;  // token blocks the hit covers, already written (or to be read: loads)
  int32_t pooled_blocks = 0;  // of them, the leading ones whose pages were all in the pool
  std::vector<PageLoad> loads;
};
// Token blocks [begin, end) of a prefix that a hit covers all of or none of: one that would end
// inside them stops at `begin`. Those of an image whose rows attend both ways (Gemma 3's), which
// the forward pass computes whole.
struct WholeBlocks {
  int32_t begin = 0;
  int32_t end = 0;
};
struct AdmitPages {
  std::vector<PageHash> prefix;
  std::vector<WholeBlocks> whole;  // of the prefix
  int32_t from = 0;                // the first position to compute, without a hit (a swapped-out sequence's n_cached)
  int32_t to = 0;                  // positions to hold in all
  int32_t keep_free = 0;           // refuse unless this many pages stay available afterwards
  bool disk_tier = false;          // the hit may take blocks from the disk tier
  std::shared_ptr<Reply<std::optional<PageGrant>>> reply;
};
// Pages a step filled, named for the prefix cache.
struct RegisterPages {
  std::vector<NamedPage> pages;
};

// The disk tier's work and its answers.
struct WritePage {
  NamedPage page;  // held by the pool (one more holder) until PageWritten comes back
};
struct PageWritten {
  NamedPage page;
  size_t file_bytes = 0;  // 0: not written (the disk is full or failing, or the engine stops)
};
struct LoadPages {
  SequencePtr seq;  // admitted: it holds its grant's pages, and n_cached covers the hit
  std::vector<PageLoad> loads;
  int32_t disk_tokens = 0;  // of the hit, the positions from pooled_blocks on
};
struct RemovePageFiles {
  std::vector<PageFileName> names;  // dropped from the index to stay within the budget
};
struct PageFilesDamaged {
  std::vector<PageFileName> names;  // found missing or bad by a load: drop them from the index
};

using RouterMessage = std::variant<Stop, NewRequest, RegisterAdapter, UnregisterAdapter, AdapterDone>;
using PrefillMessage = std::variant<Stop, NewRequest, Requeue, SlotsFreed, PagesFreed, Wake>;
using DecodeMessage = std::variant<Stop, Admitted, Wake>;
using PageMessage =
    std::variant<Stop, AllocatePages, AdmitPages, ReleasePages, RegisterPages, PageWritten, PageFilesDamaged>;
using DiskMessage = std::variant<Stop, WritePage, LoadPages, RemovePageFiles>;
using EncoderMessage = std::variant<Stop, NewRequest, Wake>;

}  // namespace pagoda
