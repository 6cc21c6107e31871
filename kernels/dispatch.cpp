#include "kernels/dispatch.h"

#include <atomic>

namespace pagoda::kernels::detail {

namespace {

const KernelTable kTables[kIsaCount] = {
    {Isa::Portable, &gemm_portable, &ops_portable, &attention_portable},
    {Isa::Avx2, &gemm_avx2, &ops_avx2, &attention_avx2},
    {Isa::Avx512, &gemm_avx512, &ops_avx512, &attention_avx512},
};

// Null until first use, so PAGODA_ISA is read lazily rather than during static initialisation.
std::atomic<const KernelTable*> g_active{nullptr};

}  // namespace

const KernelTable& table_for(Isa isa) { return kTables[static_cast<int>(isa)]; }

const KernelTable& active_table() {
  const KernelTable* table = g_active.load(std::memory_order_acquire);
  if (table != nullptr) return *table;
  const KernelTable* initial = &table_for(initial_isa());
  // A concurrent set_isa() may have won; keep its choice.
  g_active.compare_exchange_strong(table, initial, std::memory_order_acq_rel);
  return *g_active.load(std::memory_order_acquire);
}

void activate(Isa isa) { g_active.store(&table_for(isa), std::memory_order_release); }

}  // namespace pagoda::kernels::detail
