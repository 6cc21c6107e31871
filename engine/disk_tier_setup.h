#pragma once
// Opening the prefix cache's disk tier for an engine (EngineConfig::kv_disk_path): the
// directory made if need be, the engine's fingerprint taken, and what earlier engines left
// there read into the index, oldest first, trimmed to the budget.

#include <memory>

#include "actors/page_pool_actor.h"
#include "engine/model/model.h"
#include "pagoda/engine_config.h"

namespace pagoda {

// The disk tier the page-pool actor drives, its disk-tier actor's mailbox being `mailbox`.
// Temporary files of writers that died are removed and counted in metrics.disk_damaged.
// Throws pagoda::Error when the directory cannot be made or written, or the budget is too
// small for a page.
std::unique_ptr<PagePoolActor::DiskTier> open_disk_tier(const EngineConfig& config, const Model& model,
                                                        const KvLayout& layout, int32_t pool_pages,
                                                        std::shared_ptr<Mailbox<DiskMessage>> mailbox,
                                                        MetricsBoard& metrics);

}  // namespace pagoda
