#include "io/tensor_entry.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/text.h"

namespace ms {

void read_as_f32(const TensorEntry& e, float* dst) {
  const int64_t n = numel(e.shape), size = dtype_size(e.dtype);
  MS_CHECK(n * size == e.nbytes, "entry ", quote_text(e.name), " has ", e.nbytes, " bytes for shape ", shape_str(e.shape));
  if (n == 0) return;
  if (reinterpret_cast<uintptr_t>(e.data) % uintptr_t(size) == 0) {
    convert_to_f32(e.dtype, e.data, dst, n);
    return;
  }
  constexpr int64_t kChunk = 4096;  // elements staged through an aligned buffer
  alignas(8) uint8_t staged[kChunk * 8];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t m = std::min(kChunk, n - i);
    std::memcpy(staged, e.data + i * size, size_t(m * size));
    convert_to_f32(e.dtype, staged, dst + i, m);
  }
}

}  // namespace ms
