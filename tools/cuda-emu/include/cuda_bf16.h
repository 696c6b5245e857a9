// bf16 for the CUDA emulation: megaslide's own conversions (round to nearest even, quiet NaN), as the hardware's.
#pragma once
#include <cstdint>

#include "core/dtype.h"

struct __nv_bfloat16 {
  uint16_t bits;
};
inline __nv_bfloat16 __float2bfloat16(float f) { return {ms::f32_to_bf16(f)}; }
inline float __bfloat162float(__nv_bfloat16 b) { return ms::bf16_to_f32(b.bits); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.bits; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return {u}; }
