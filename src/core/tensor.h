// Shapes and a small owning host tensor (used at the edges: files, CLI, tests).
// Kernels take raw pointers plus sizes; buffers inside the engine come from size tables.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/aligned.h"
#include "core/dtype.h"

namespace ms {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3, 4]"

struct Tensor {
  DType dtype = DType::f32;
  Shape shape;
  AlignedBuffer<uint8_t> bytes;

  Tensor() = default;
  Tensor(DType t, Shape s);  // zero-filled
  static Tensor f32(Shape s) { return Tensor(DType::f32, std::move(s)); }

  int64_t numel() const { return ms::numel(shape); }
  int64_t nbytes() const { return numel() * dtype_size(dtype); }
  template <class T>
  T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <class T>
  const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
};

}  // namespace ms
