// Storage dtypes, the bf16 / f16 <-> f32 conversions (round to nearest even) and the fp8 -> f32 widenings.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace ms {

// f8_e4m3: OCP E4M3FN (bias 7, no infinities, S.1111.111 is NaN, max 448), torch.float8_e4m3fn;
// f8_e5m2: OCP E5M2 (bias 15, IEEE-style infinities and NaNs, max 57344), torch.float8_e5m2.
enum class DType { f32, f64, f16, bf16, i64, i32, u8, f8_e4m3, f8_e5m2 };

int dtype_size(DType t);
std::string dtype_name(DType t);  // safetensors spelling: "F32", "BF16", ...
bool dtype_from_name(const std::string& name, DType* out);

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float f16_to_f32(uint16_t h);
float f8_e4m3_to_f32(uint8_t b);  // exact: every fp8 value is a float
float f8_e5m2_to_f32(uint8_t b);
uint16_t f32_to_f16(float f);

// Converts n elements of `src` (dtype t) to f32 / from f32 (not to the fp8 types, which are read-only here).
void convert_to_f32(DType t, const void* src, float* dst, int64_t n);
void convert_from_f32(DType t, const float* src, void* dst, int64_t n);
// Rounds n floats to bf16 where they lie: the n bf16 values fill the first half of the buffer, whose start is
// returned. For a copy that must not need twice the memory (a model's weights for a GPU).
uint16_t* narrow_to_bf16_in_place(float* data, int64_t n);

}  // namespace ms
