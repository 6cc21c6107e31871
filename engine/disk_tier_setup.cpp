#include "engine/disk_tier_setup.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "engine/kv/tier_fingerprint.h"
#include "kernels/cpu_features.h"
#include "pagoda/error.h"

namespace pagoda {

std::unique_ptr<PagePoolActor::DiskTier> open_disk_tier(const EngineConfig& config, const Model& model,
                                                        const KvLayout& layout, int32_t pool_pages,
                                                        std::shared_ptr<Mailbox<DiskMessage>> mailbox,
                                                        MetricsBoard& metrics) {
  const std::filesystem::path dir = config.kv_disk_path;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    throw Error("KV disk tier: cannot make the directory " + dir.string() + (ec ? ": " + ec.message() : ""));
  }
  if (::access(dir.c_str(), R_OK | W_OK | X_OK) != 0) {
    throw Error("KV disk tier: cannot write in " + dir.string() + ": " + std::strerror(errno));
  }
  if (config.kv_disk_bytes < layout.bytes_per_page() + 4096) {
    throw Error("KV disk tier: kv_disk_bytes (" + std::to_string(config.kv_disk_bytes) +
                ") is too small for one KV page (" + std::to_string(layout.bytes_per_page()) + " bytes)");
  }
  if (!model.file) throw Error("KV disk tier: the model has no file to take a fingerprint of");
  auto disk = std::make_unique<PagePoolActor::DiskTier>(PagePoolActor::DiskTier{
      DiskPageIndex(config.kv_disk_bytes),
      tier_fingerprint(model.file->bytes(), kernels::isa_name(kernels::active_isa())), std::move(mailbox),
      // Pages waiting to be written are held in the pool: a 16th of it at most.
      std::clamp(pool_pages / 16, 4, 256)});
  int64_t torn = 0;
  for (const FoundPageFile& found : scan_page_files(dir, torn)) {
    for (const PageFileName& old : disk->index.insert(found.name, found.bytes)) remove_page_file(dir, old);
  }
  metrics.disk_damaged.fetch_add(torn, std::memory_order_relaxed);
  return disk;
}

}  // namespace pagoda
