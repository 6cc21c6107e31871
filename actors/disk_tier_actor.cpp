#include "actors/disk_tier_actor.h"

#include <cstdio>

namespace pagoda {

void DiskTierActor::run() {
  while (!stopped()) {
    if (loads_.empty() && writes_.empty() && !stopping_) handle(mailbox_->receive());
    while (auto message = mailbox_->try_receive()) handle(std::move(*message));
    if (!loads_.empty()) {
      load(loads_.front());
      loads_.pop_front();
    } else if (!writes_.empty()) {
      write(writes_.front());
      writes_.pop_front();
    } else if (stopping_) {
      stop();
    }
  }
}

void DiskTierActor::handle(DiskMessage message) {
  if (auto* w = std::get_if<WritePage>(&message)) {
    writes_.push_back(std::move(*w));
  } else if (auto* l = std::get_if<LoadPages>(&message)) {
    loads_.push_back(std::move(*l));
  } else if (auto* r = std::get_if<RemovePageFiles>(&message)) {
    for (const PageFileName& name : r->names) remove_page_file(dir_, name);
  } else {
    stopping_ = true;
  }
}

void DiskTierActor::write(WritePage& w) {
  const NamedPage& p = w.page;
  std::string error;
  const auto bytes = write_page_file(dir_, {fingerprint_, p.hash, p.group},
                                     {p.previous, p.tokens, {kv_.page(p.page), kv_.layout.bytes_per_page()}}, error);
  if (bytes) {
    metrics_.disk_written_bytes.fetch_add(int64_t(*bytes), std::memory_order_relaxed);
  } else if (metrics_.disk_write_errors.fetch_add(1, std::memory_order_relaxed) == 0) {
    // Once: a full or failing disk costs the tier's hits, never a request.
    std::fprintf(stderr, "pagoda: KV disk tier: %s (pages stay in memory only)\n", error.c_str());
  }
  pool_->post(PageWritten{std::move(w.page), bytes.value_or(0)});
}

void DiskTierActor::load(LoadPages& l) {
  Sequence& seq = *l.seq;
  const size_t page_bytes = kv_.layout.bytes_per_page();
  const int32_t tokens_per_page = kv_.layout.tokens_per_page;
  std::vector<PageFileName> bad;
  for (const PageLoad& load : l.loads) {
    const PageFileName name{fingerprint_, seq.prefix.hash(load.block), load.group};
    const auto tokens = std::span<const int32_t>(seq.tokens)
                            .subspan(size_t(load.block) * size_t(tokens_per_page), size_t(tokens_per_page));
    const PageFileStatus status =
        read_page_file(dir_, name, seq.prefix.previous(load.block), tokens, {kv_.page(load.page), page_bytes});
    if (status == PageFileStatus::Read) {
      metrics_.disk_read_bytes.fetch_add(int64_t(page_bytes), std::memory_order_relaxed);
      continue;
    }
    if (status == PageFileStatus::Damaged) metrics_.disk_damaged.fetch_add(1, std::memory_order_relaxed);
    bad.push_back(name);
  }
  if (bad.empty()) {
    metrics_.prefix_hit_tokens.fetch_add(seq.n_cached, std::memory_order_relaxed);
    metrics_.disk_hit_tokens.fetch_add(l.disk_tokens, std::memory_order_relaxed);
    decode_->post(Admitted{std::move(l.seq)});
    return;
  }
  // The index forgets the files, and the sequence waits for pages again without the disk tier
  // (so it never meets those files again, whenever the pool gets to forget them): it computes
  // what it could not read.
  pool_->post(PageFilesDamaged{std::move(bad)});
  pool_->post(ReleasePages{seq.table.take_pages()});
  seq.n_cached = 0;
  seq.prefix.set_offered(0);
  seq.disk_reads = false;
  seq.requeued = true;
  metrics_.queued.fetch_add(1, std::memory_order_relaxed);
  prefill_->post(Requeue{std::move(l.seq)});
}

void DiskTierActor::drain() {
  auto finish = [&](DiskMessage& message) {
    if (auto* w = std::get_if<WritePage>(&message)) {
      pool_->post(PageWritten{std::move(w->page), 0});
    } else if (auto* l = std::get_if<LoadPages>(&message)) {
      decode_->post(Admitted{std::move(l->seq)});
    }
  };
  for (LoadPages& l : loads_) decode_->post(Admitted{std::move(l.seq)});
  for (WritePage& w : writes_) pool_->post(PageWritten{std::move(w.page), 0});
  loads_.clear();
  writes_.clear();
  while (auto message = mailbox_->try_receive()) finish(*message);
}

}  // namespace pagoda
