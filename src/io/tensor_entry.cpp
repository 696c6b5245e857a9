#include "io/tensor_entry.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/text.h"

namespace ms {

void read_as_f32(const TensorEntry& e, float* dst) {
  const int64_t n = numel(e.shape), size = dtype_size(e.dtype);
  MS_CHECK(n * size == e.nbytes, "entry ", quote_text(e.name), " has ", e.nbytes, " bytes for shape ",
           shape_str(e.shape));
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

TensorEntry row_slice(const TensorEntry& e, int64_t row0, int64_t rows) {
  MS_CHECK(!e.shape.empty() && row0 >= 0 && rows >= 0 && row0 + rows <= e.shape[0], "rows ", row0, "..", row0 + rows,
           " of ", quote_text(e.name), " ", shape_str(e.shape));
  TensorEntry out = e;
  out.shape[0] = rows;
  const int64_t row_bytes = numel(e.shape) / e.shape[0] * dtype_size(e.dtype);
  out.data = e.data + row0 * row_bytes;
  out.nbytes = rows * row_bytes;
  return out;
}

}  // namespace ms
