#include "engine/forward/pack_weights.h"

#include <vector>

namespace pagoda {

kernels::WeightMatrix pack_weights(std::initializer_list<const WeightTensor*> parts, bool discard) {
  auto release = [discard](const WeightTensor* p, const void* begin, std::size_t bytes) {
    if (discard) p->discard_pages(begin, bytes);
    else p->release_pages(begin, bytes);
  };
  std::vector<kernels::WeightPart> views;
  for (const WeightTensor* p : parts)
    views.push_back({p->type, p->data, int(p->rows),
                     [p, release](const void* begin, std::size_t bytes) { release(p, begin, bytes); }});
  kernels::WeightMatrix matrix = kernels::WeightMatrix::make(views, int((*parts.begin())->cols));
  for (const WeightTensor* p : parts)
    if (kernels::copied_at_make(p->type)) release(p, p->data, p->n_bytes());
  return matrix;
}

}  // namespace pagoda
