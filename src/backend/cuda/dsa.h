// The CUDA kernels of ops/dsa.h.
#pragma once
#include <array>
#include <cstdint>

#include "ops/dsa.h"
#include "runtime/reduction_scratch.h"

struct CUstream_st;

// The CUDA kernels (backend/cuda/dsa.cu), enqueued on `stream`: q, k, v, out, dout, dq, dk, dv, offsets, doffsets
// bf16, lse fp32, head dims up to 256, P up to 2048. Same geometry and semantics as the CPU kernels (ops/dsa.h); the
// sums run in another order, so results agree to rounding. Deterministic: dq and doffsets are owned by their query, dk
// and dv by their key, which gathers its (query, slot) shares in a fixed order; no atomics on the gradients. scratch
// holds dsa_backward_scratch(dims, a) floats: the slots' softmax coefficients of the backward's first pass. halo_rows:
// the rows of K or V a block stages in shared memory at most (0: none, every corner read from global memory); it
// changes speed, never results.
namespace ms::cuda {

constexpr int64_t kDsaMaxHeadDim = 256;   // 8 channels per lane
constexpr int64_t kDsaMaxSlots = 2048;    // a block keeps 11 floats per slot of one query in shared memory
constexpr int64_t kDsaHaloRows = 640;     // staged rows per block by default: 640 x 64 channels x 2 B = 80 KiB
constexpr int64_t kDsaMaxHaloRows = 768;  // with P = 2048 the backward's block then holds 209 KiB

void dsa_forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* offsets, uint16_t* out,
                 float* lse, const VideoAttentionDims& dims, const DsaArgs& a, CUstream_st* stream,
                 int64_t halo_rows = kDsaHaloRows);
void dsa_backward(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* offsets, const uint16_t* out,
                  const float* lse, const uint16_t* dout, uint16_t* dq, uint16_t* dk, uint16_t* dv, uint16_t* doffsets,
                  float* scratch, const VideoAttentionDims& dims, const DsaArgs& a, CUstream_st* stream,
                  int64_t halo_rows = kDsaHaloRows);
void dsa_offsets_forward(const uint16_t* raw, uint16_t* offsets, const std::array<double, 3>& range, int64_t N,
                         int64_t M, CUstream_st* stream);
void dsa_offsets_backward(const uint16_t* raw, const uint16_t* doffsets, uint16_t* draw,
                          const std::array<double, 3>& range, int64_t N, int64_t M, CUstream_st* stream);

}  // namespace ms::cuda
