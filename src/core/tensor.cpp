#include "core/tensor.h"

#include <cstring>

#include "core/check.h"

namespace ms {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Tensor::Tensor(DType t, Shape s) : dtype(t), shape(std::move(s)) {
  for (int64_t d : shape) MS_CHECK(d >= 0, "negative dimension in shape ", shape_str(shape));
  bytes = AlignedBuffer<uint8_t>(size_t(nbytes()));
}

}  // namespace ms
