// The umT5 encoder's forward on the GPU (runtime/t5_forward.h), with t5_encode's contract (backend/cpu/t5_encoder.h):
// every layer's weights are uploaded once as bf16 (the token embedding stays in the host's mapped file: a prompt reads
// only its own rows), then each prompt runs on the device. The residual stream stays in fp32; the projections, the FFN
// and both attention products run on cuBLASLt (bf16 operands, fp32 accumulation); norms and the biased softmax compute
// in fp32 (docs/text_encoder.md states the precision).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/gemm.h"
#include "runtime/t5_forward.h"

namespace ms::cuda {

class T5Encoder final : public T5Forward {
 public:
  // Uploads w's layers. Throws ms::Error with refuses(w.config()) and --backend cpu when that is not empty. The caller
  // has checked that a GPU can be used (registry's make_t5_forward).
  explicit T5Encoder(const T5Weights& w);
  T5Encoder(const T5Encoder&) = delete;
  T5Encoder& operator=(const T5Encoder&) = delete;

  // ids [L] (1 <= L <= text_len) -> context [L, dim]. w: the weights this encoder was made from (their embedding rows
  // are read from it); the same errors as t5_encode.
  std::vector<float> encode(const T5Weights& w, const std::vector<int64_t>& ids) override;

  // Device bytes of the uploaded weights, and of the working set of a text_len-token prompt.
  static int64_t weight_bytes(const T5Config& c);
  static int64_t workspace_bytes(const T5Config& c);
  // Why the GPU's free memory cannot hold both, naming the bytes; "" when it can.
  static std::string refuses(const T5Config& c);

 private:
  const uint16_t* weight(const std::string& name) const;  // a bf16 tensor of the pool
  const float* table(int64_t layer) const;                // that layer's position table [buckets, heads]

  struct CudaFree {
    void operator()(char* p) const;
  };
  using DeviceBytes = std::unique_ptr<char, CudaFree>;

  T5Config config_;
  GemmContext gemm_;
  DeviceBytes weights_;                    // the bf16 tensors, then the position tables in fp32
  std::map<std::string, int64_t> offset_;  // tensor name -> byte offset in weights_
  DeviceBytes workspace_;                  // [workspace_bytes]
};

}  // namespace ms::cuda
