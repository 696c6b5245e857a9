#include "core/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/check.h"

namespace ms {

int dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i64: return 8;
    case DType::i32: return 4;
    case DType::u8: return 1;
    case DType::f8_e4m3: return 1;
    case DType::f8_e5m2: return 1;
  }
  return 0;
}

namespace {
struct Named {
  DType t;
  const char* name;
};
constexpr Named kNames[] = {{DType::f32, "F32"}, {DType::f64, "F64"}, {DType::f16, "F16"}, {DType::bf16, "BF16"},
                            {DType::i64, "I64"}, {DType::i32, "I32"}, {DType::u8, "U8"},
                            {DType::f8_e4m3, "F8_E4M3"}, {DType::f8_e5m2, "F8_E5M2"}};
}  // namespace

std::string dtype_name(DType t) {
  for (const auto& n : kNames)
    if (n.t == t) return n.name;
  return "?";
}

bool dtype_from_name(const std::string& name, DType* out) {
  for (const auto& n : kNames)
    if (name == n.name) {
      *out = n.t;
      return true;
    }
  return false;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400));
      u = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | man << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t sign = uint16_t((u >> 16) & 0x8000);
  if (std::isnan(f)) return sign | 0x7e00;
  float a = std::fabs(f);
  if (a >= 65520.0f) return sign | 0x7c00;  // rounds to infinity
  if (a < 6.103515625e-05f) {               // subnormal or zero: a / 2^-24, rounded to nearest even
    float q = std::nearbyint(a * 16777216.0f);
    return sign | uint16_t(q);
  }
  uint32_t exp = ((u >> 23) & 0xff) - 127 + 15, man = u & 0x7fffff;
  uint32_t r = (exp << 10) | (man >> 13);
  uint32_t rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) ++r;
  return sign | uint16_t(r);
}

namespace {
// An fp8 code with `man_bits` mantissa bits and exponent bias `bias` as a float: the magnitude bits shifted into
// the float's exponent and mantissa fields, rebiased; subnormals (exponent field 0) are m * 2^(1 - bias - man_bits).
float fp8_magnitude(uint32_t mag, int man_bits, int bias) {
  const uint32_t exp = mag >> man_bits, man = mag & ((1u << man_bits) - 1);
  if (exp == 0) return std::ldexp(float(man), 1 - bias - man_bits);
  const uint32_t u = (exp + 127 - uint32_t(bias)) << 23 | man << (23 - man_bits);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

float f8_e4m3_to_f32(uint8_t b) {
  const uint32_t mag = b & 0x7f;
  const float f = mag == 0x7f ? std::numeric_limits<float>::quiet_NaN() : fp8_magnitude(mag, 3, 7);
  return b & 0x80 ? -f : f;
}

float f8_e5m2_to_f32(uint8_t b) {
  const uint32_t mag = b & 0x7f;
  float f;
  if (mag >= 0x7c)  // exponent field all ones: infinity (mantissa 0) or NaN
    f = mag == 0x7c ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  else
    f = fp8_magnitude(mag, 2, 15);
  return b & 0x80 ? -f : f;
}

void convert_to_f32(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::f32: std::memcpy(dst, src, size_t(n) * 4); return;
    case DType::f64:
      for (int64_t i = 0; i < n; ++i) dst[i] = float(static_cast<const double*>(src)[i]);
      return;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return;
    case DType::f16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return;
    case DType::i64:
      for (int64_t i = 0; i < n; ++i) dst[i] = float(static_cast<const int64_t*>(src)[i]);
      return;
    case DType::i32:
      for (int64_t i = 0; i < n; ++i) dst[i] = float(static_cast<const int32_t*>(src)[i]);
      return;
    case DType::u8:
      for (int64_t i = 0; i < n; ++i) dst[i] = float(static_cast<const uint8_t*>(src)[i]);
      return;
    case DType::f8_e4m3:
      for (int64_t i = 0; i < n; ++i) dst[i] = f8_e4m3_to_f32(static_cast<const uint8_t*>(src)[i]);
      return;
    case DType::f8_e5m2:
      for (int64_t i = 0; i < n; ++i) dst[i] = f8_e5m2_to_f32(static_cast<const uint8_t*>(src)[i]);
      return;
  }
}

void convert_from_f32(DType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case DType::f32: std::memcpy(dst, src, size_t(n) * 4); return;
    case DType::f64:
      for (int64_t i = 0; i < n; ++i) static_cast<double*>(dst)[i] = src[i];
      return;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(src[i]);
      return;
    case DType::f16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_f16(src[i]);
      return;
    default: MS_FAIL("cannot store f32 values as ", dtype_name(t));
  }
}

uint16_t* narrow_to_bf16_in_place(float* data, int64_t n) {
  // Chunk by chunk through a scratch buffer: chunk [a, a + m) lands on bytes [2a, 2a + 2m), which hold floats below
  // a + m, every one of them read by then.
  constexpr int64_t kChunk = int64_t(1) << 20;
  std::vector<uint16_t> scratch(size_t(std::min(n, kChunk)));
  char* out = reinterpret_cast<char*>(data);
  for (int64_t a = 0; a < n; a += kChunk) {
    const int64_t m = std::min(kChunk, n - a);
    convert_from_f32(DType::bf16, data + a, scratch.data(), m);
    std::memcpy(out + 2 * a, scratch.data(), size_t(m) * 2);
  }
  return reinterpret_cast<uint16_t*>(data);
}

}  // namespace ms
