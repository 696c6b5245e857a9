// A tensor inside an opened weight file (safetensors or PyTorch zip): name, dtype, shape and its bytes.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/tensor.h"

namespace ms {

// data points into the file's mapping (or into a copy the file object owns) and is valid while the file is open;
// it is only as aligned as the file makes it, so read it through read_as_f32 or memcpy. The elements are
// contiguous, row-major.
struct TensorEntry {
  std::string name;
  DType dtype;
  Shape shape;
  const uint8_t* data;
  int64_t nbytes;
};

// Converts e's numel(e.shape) elements to f32 into dst (every DType; fp8 widened exactly); handles unaligned data.
void read_as_f32(const TensorEntry& e, float* dst);

// Rows [row0, row0 + rows) of e along dim 0, as an entry of its own (a view into the same bytes).
TensorEntry row_slice(const TensorEntry& e, int64_t row0, int64_t rows);

}  // namespace ms
