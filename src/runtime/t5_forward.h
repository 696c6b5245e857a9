// What computes the umT5 encoder's forward for t5/text_encoder.h: the CPU's (backend/cpu/t5_encoder.h) or a GPU's
// (backend/cuda/t5_encoder.h); the registry makes a backend's (make_t5_forward).
#pragma once
#include <cstdint>
#include <vector>

#include "model/t5_weights.h"

namespace ms {

class T5Forward {
 public:
  virtual ~T5Forward() = default;
  // ids [L] (token ids, EOS included, no padding) -> context [L, dim], with t5_encode's contract
  // (backend/cpu/t5_encoder.h). w: the weights this forward was made for.
  virtual std::vector<float> encode(const T5Weights& w, const std::vector<int64_t>& ids) = 0;
};

}  // namespace ms
