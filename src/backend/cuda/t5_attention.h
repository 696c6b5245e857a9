// The umT5 encoder's attention softmax on the GPU (backend/cpu/t5_encoder.cpp states it on the CPU): unscaled scores
// plus each head's bucketed relative-position bias, normalised per query row.
#pragma once
#include <cstdint>

struct CUstream_st;

namespace ms::cuda {

// p [H, L, L] (bf16) = softmax over j of s[h, i, j] + table[bucket[j - i + L - 1], h], in fp32: s [H, L, L] fp32 (the
// heads' q k^T), bucket [2L - 1] the bucket of each offset key - query (model/t5_config.h, t5_offset_buckets), table
// [buckets, H] fp32. Enqueued on `stream`.
void t5_bias_softmax(const float* s, const int32_t* bucket, const float* table, uint16_t* p, int64_t H, int64_t L,
                     CUstream_st* stream);

}  // namespace ms::cuda
