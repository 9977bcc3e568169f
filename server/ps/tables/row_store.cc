#include "server/ps/tables/row_store.h"

namespace pstrain::server {

RowStore::RowStore(const RowLayout& layout)
    : meta_offset_(layout.meta_offset()), arena_(layout.stride()) {}

uint64_t RowStore::RemoveAt(size_t slot) {
  uint64_t id;
  const uint32_t r = index_.SlotRow(slot, &id);
  index_.EraseSlot(slot);
  arena_.Release(r);
  return id;
}

void RowStore::Clear() {
  index_.Clear();
  arena_.Clear();
}

void RowStore::Compact() {
  if (arena_.free_rows() >= 2 * arena_.rows_per_chunk() && arena_.PlanShrink() > 0) {
    index_.MapRows([&](uint32_t r) { return arena_.Moved(r); });
    arena_.FinishShrink();
  }
}

}  // namespace pstrain::server
