#pragma once
// The disk-tier actor: the prefix cache's second tier (EngineConfig::kv_disk_path), doing all
// of its file work on a thread of its own, so neither the step loop nor the page pool ever
// waits for a disk. It keeps no state of its own: the page-pool actor owns the index of what is
// on disk (disk_page_index.h) and decides what to write and remove; this actor carries it out.
//
// - WritePage: a full named page goes to its file (page_file.h); the pool holds the page until
//   PageWritten comes back, so its bytes cannot change underneath.
// - LoadPages: an admitted sequence whose hit lies partly on disk has fresh pages for those
//   blocks; they are read and checked, then the sequence goes on to the decode scheduler as any
//   admission does. When a file is missing or bad, the sequence gives its pages back and waits
//   again without the disk tier (it then computes what it could not read), and the pool is told
//   to forget the file: a damaged page costs time, never a wrong token.
// - RemovePageFiles: files the index let go to stay within its budget.
// Loads go before writes: a waiting request's time to first token matters more than the backlog.

#include <deque>
#include <filesystem>
#include <memory>

#include "actors/actor.h"
#include "actors/messages.h"
#include "engine/kv/kv_layout.h"
#include "engine/metrics/metrics_board.h"

namespace pagoda {

class DiskTierActor : public Actor<DiskMessage> {
 public:
  DiskTierActor(std::shared_ptr<Mailbox<DiskMessage>> mailbox, std::filesystem::path dir, const PageHash& fingerprint,
                KvView kv, std::shared_ptr<Mailbox<PageMessage>> pool, std::shared_ptr<Mailbox<PrefillMessage>> prefill,
                std::shared_ptr<Mailbox<DecodeMessage>> decode, MetricsBoard& metrics)
      : Actor(std::move(mailbox)),
        dir_(std::move(dir)),
        fingerprint_(fingerprint),
        kv_(kv),
        pool_(std::move(pool)),
        prefill_(std::move(prefill)),
        decode_(std::move(decode)),
        metrics_(metrics) {}

  // After the actor stopped (shutdown): loads left go on unread (the decode scheduler's drain
  // cancels them), writes left come back unwritten.
  void drain();

 private:
  void run() override;
  void handle(DiskMessage message) override;
  void write(WritePage& w);
  void load(LoadPages& l);

  std::filesystem::path dir_;
  PageHash fingerprint_;
  KvView kv_;
  std::shared_ptr<Mailbox<PageMessage>> pool_;
  std::shared_ptr<Mailbox<PrefillMessage>> prefill_;
  std::shared_ptr<Mailbox<DecodeMessage>> decode_;
  MetricsBoard& metrics_;
  std::deque<LoadPages> loads_;
  std::deque<WritePage> writes_;
  bool stopping_ = false;  // Stop came: finish what is queued, then stop
};

}  // namespace pagoda
