#include "model/models/id_deduper.h"

namespace pstrain::worker {

void IdDeduper::Reset(size_t max_ids) {
  size_t want = 16;
  while (want < 2 * max_ids) want *= 2;
  if (want > slots_.size()) {
    slots_.assign(want, Slot{0, 0, 0});
    epoch_ = 0;
  }
  mask_ = slots_.size() - 1;
  if (++epoch_ == 0) {  // wrapped: stale slots could look live
    for (Slot& s : slots_) s.epoch = 0;
    epoch_ = 1;
  }
}

}  // namespace pstrain::worker
