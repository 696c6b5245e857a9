// The CUDA kernels of ops/dsa.h.
#pragma once
#include <array>
#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/dsa.h"
#include "runtime/reduction_scratch.h"

// The CUDA kernels (backend/cuda/dsa.cu), enqueued on the launch's stream: q, k, v, out, dout, dq, dk, dv, offsets,
// doffsets bf16, lse fp32, head dims up to 256, P up to 2048. Same geometry and semantics as the CPU kernels
// (ops/dsa.h); the sums run in another order, so results agree to rounding. Forward and backward run on tensor cores
// for head dims up to 128 and up to 64 slots (the launch's dsa_tensor_cores), else the staged kernels, with one log
// line. Deterministic: dq and doffsets are owned by
// their query, dk and dv by their key, which gathers its (query, slot) shares in a fixed order; no atomics on the
// gradients. The backward's scratch holds dsa_backward_scratch(dims, args) floats: the slots' softmax coefficients of
// its first pass. The launch's dsa_halo_rows bounds the rows of K or V a block stages in shared memory; it changes
// speed, never results.
namespace ms::cuda {

constexpr int64_t kDsaMaxHeadDim = 256;   // 8 channels per lane
constexpr int64_t kDsaMaxSlots = 2048;    // a block keeps 11 floats per slot of one query in shared memory
constexpr int64_t kDsaMaxHaloRows = 768;  // with P = 2048 the backward's block then holds 209 KiB

void dsa_forward(const DsaParams<uint16_t, float>& p, const Launch& l);
void dsa_backward(const DsaParams<uint16_t, float>& p, const Launch& l);
void dsa_offsets_forward(const DsaOffsetsParams<uint16_t>& p, const Launch& l);
void dsa_offsets_backward(const DsaOffsetsParams<uint16_t>& p, const Launch& l);

}  // namespace ms::cuda
