// Helpers for the CUDA tests: a skip when no GPU can be used (reported as skipped, never as passed),
// device buffers, and bf16 inputs with their exact float64 values for the CPU reference.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/device.h"
#include "core/dtype.h"
#include "test_util.h"

#define MS_REQUIRE_GPU()                                                                                \
  do {                                                                                                  \
    if (const std::string why = ::ms::cuda::unusable_reason(); !why.empty())                            \
      GTEST_SKIP() << "no usable CUDA GPU (" << why << "): this test needs one; tools/device-check.sh"; \
  } while (0)

namespace ms::test {

template <class T>
class DeviceBuffer {
 public:
  // n elements, every one `fill` (a poison value where each element must be written).
  DeviceBuffer(int64_t n, T fill) : DeviceBuffer(std::vector<T>(static_cast<size_t>(n), fill)) {}
  explicit DeviceBuffer(const std::vector<T>& host) : n_(host.size()) {
    MS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n_ * sizeof(T)));
    MS_CUDA_CHECK(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() { return p_; }
  int64_t size() const { return int64_t(n_); }
  // A launch on the default stream with this buffer (fp32) as its scratch.
  cuda::Launch launch() requires std::is_same_v<T, float> { return {nullptr, p_, int64_t(n_)}; }
  std::vector<T> read() const {
    std::vector<T> host(n_);
    MS_CUDA_CHECK(cudaDeviceSynchronize());
    MS_CUDA_CHECK(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  size_t n_;
  T* p_ = nullptr;
};

// Random values rounded to bf16: bits for the device, the same values exactly in float64 for the reference.
struct Bf16Input {
  std::vector<uint16_t> bits;
  std::vector<double> values;
};
inline Bf16Input random_bf16(size_t n, uint64_t seed, double scale = 1.0) {
  Bf16Input r;
  for (double v : randn(n, seed, scale)) {
    r.bits.push_back(f32_to_bf16(float(v)));
    r.values.push_back(double(bf16_to_f32(r.bits.back())));
  }
  return r;
}

inline std::vector<double> widen(const std::vector<uint16_t>& bf16) {
  std::vector<double> v;
  for (uint16_t b : bf16) v.push_back(double(bf16_to_f32(b)));
  return v;
}

// Initial gradients: non-zero, since the kernels accumulate, but small beside what they add, so that an
// error in the added part is not hidden under them.
constexpr double kAccumulateScale = 0.05;

// A bf16 result against the float64 reference: one rounding to bf16 (2^-9 relative) on top of fp32
// arithmetic gives an rms relative error near 1.5e-3; 6e-3 leaves margin and still catches a wrong term.
constexpr double kBf16Tol = 6e-3;
// fp32 results (statistics, weight gradients) from bf16 inputs: fp32 sums, a few ulps each.
constexpr double kDeviceF32Tol = 1e-4;

// Expects rel_l2(got, ref) < tol and records the error as the test property `what` (tools/device-check.sh
// reads it from the JSON report into its table).
template <class A, class B>
void expect_close(const std::string& what, const A& got, const B& ref, double tol) {
  const double e = rel_l2(got, ref);
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", e);
  testing::Test::RecordProperty(what, text);
  EXPECT_LT(e, tol) << what;
}

// C [M,N] = alpha op(A) op(B) + beta C in plain loops: the GEMM's independent reference.
inline void reference_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                           const std::vector<double>& A, int64_t lda, const std::vector<double>& B, int64_t ldb,
                           double beta, std::vector<double>& C) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += A[size_t(ta ? k * lda + m : m * lda + k)] * B[size_t(tb ? n * ldb + k : k * ldb + n)];
      C[size_t(m * N + n)] = alpha * s + beta * C[size_t(m * N + n)];
    }
}

}  // namespace ms::test
