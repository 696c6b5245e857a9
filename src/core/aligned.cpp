#include "core/aligned.h"

#include "core/check.h"

namespace ms {

void* page_alloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  size_t rounded = (bytes + 4095) / 4096 * 4096;
  void* p = std::aligned_alloc(4096, rounded);
  if (!p)
    MS_FAIL("out of host memory allocating ", bytes, " bytes; use a smaller model, batch or video size");
  std::memset(p, 0, rounded);
  return p;
}

void page_free(void* p) { std::free(p); }

}  // namespace ms
