// The CUDA kernels against the CPU reference in float64, run on the same bf16-rounded inputs, on odd shapes
// (rows longer than a block's threads, sizes off every power of two). Skipped without a GPU.
#include <cmath>
#include <type_traits>

#include "backend/cuda/activation.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/layernorm.h"
#include "backend/cuda/rmsnorm.h"
#include "cuda_util.h"
#include "ops/activation.h"
#include "ops/layernorm.h"
#include "ops/rmsnorm.h"

namespace ms::test {
namespace {

constexpr double kEps = 1e-6;

TEST(CudaOps, RmsNormMatchesCpuReference) {
  MS_REQUIRE_GPU();
  const int64_t N = 137, C = 1029;  // 137 rows: three chunks of the weight-gradient sum
  auto x = random_bf16(static_cast<size_t>(N * C), 1, 3.0), w = random_bf16(static_cast<size_t>(C), 2),
       dy = random_bf16(static_cast<size_t>(N * C), 3),
       dx0 = random_bf16(static_cast<size_t>(N * C), 4, kAccumulateScale);
  const std::vector<double> dw0 = randn(static_cast<size_t>(C), 5);
  std::vector<double> y(static_cast<size_t>(N * C)), rstd(static_cast<size_t>(N)), dx = dx0.values, dw = dw0;
  cpu::rmsnorm_forward<double>(
      {.x = x.values.data(), .w = w.values.data(), .y = y.data(), .rstd = rstd.data(), .N = N, .C = C, .eps = kEps});
  cpu::rmsnorm_backward<double>({.x = x.values.data(),
                                 .w = w.values.data(),
                                 .rstd = rstd.data(),
                                 .dy = dy.values.data(),
                                 .dx = dx.data(),
                                 .dw = dw.data(),
                                 .N = N,
                                 .C = C});

  DeviceBuffer<uint16_t> dx_(x.bits), dw_x(w.bits), dy_(dy.bits), gx(dx0.bits), gy(N * C, 0);
  DeviceBuffer<float> rs(N, 0.f), gw(to_f32(dw0)), scratch(cuda::rmsnorm_backward_scratch(N, C), 0.f);
  cuda::rmsnorm_forward(
      RmsNormParams<uint16_t, float>{
          .x = dx_.get(), .w = dw_x.get(), .y = gy.get(), .rstd = rs.get(), .N = N, .C = C, .eps = kEps},
      nullptr);
  cuda::rmsnorm_backward({.x = dx_.get(),
                          .w = dw_x.get(),
                          .rstd = rs.get(),
                          .dy = dy_.get(),
                          .dx = gx.get(),
                          .dw = gw.get(),
                          .N = N,
                          .C = C},
                         scratch.launch());
  expect_close("y", widen(gy.read()), y, kBf16Tol);
  expect_close("rstd", rs.read(), rstd, kDeviceF32Tol);
  expect_close("dx", widen(gx.read()), dx, kBf16Tol);
  expect_close("dw", gw.read(), dw, kDeviceF32Tol);
}

void check_layernorm(bool affine) {
  const int64_t N = 141, C = 777;
  auto x = random_bf16(static_cast<size_t>(N * C), 11, 2.0), w = random_bf16(static_cast<size_t>(C), 12),
       b = random_bf16(static_cast<size_t>(C), 13), dy = random_bf16(static_cast<size_t>(N * C), 14),
       dx0 = random_bf16(static_cast<size_t>(N * C), 15, kAccumulateScale);
  const std::vector<double> dw0 = randn(static_cast<size_t>(C), 16), db0 = randn(static_cast<size_t>(C), 17);
  std::vector<double> y(static_cast<size_t>(N * C)), mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N)),
      dx = dx0.values, dw = dw0, db = db0;
  const double* wp = affine ? w.values.data() : nullptr;
  const double* bp = affine ? b.values.data() : nullptr;
  cpu::layernorm_forward<double>({.x = x.values.data(),
                                  .w = wp,
                                  .b = bp,
                                  .y = y.data(),
                                  .mean = mean.data(),
                                  .rstd = rstd.data(),
                                  .N = N,
                                  .C = C,
                                  .eps = kEps});
  cpu::layernorm_backward<double>({.x = x.values.data(),
                                   .w = wp,
                                   .mean = mean.data(),
                                   .rstd = rstd.data(),
                                   .dy = dy.values.data(),
                                   .dx = dx.data(),
                                   .dw = affine ? dw.data() : nullptr,
                                   .db = affine ? db.data() : nullptr,
                                   .N = N,
                                   .C = C});

  DeviceBuffer<uint16_t> gx_in(x.bits), gw_in(w.bits), gb_in(b.bits), gdy(dy.bits), gdx(dx0.bits), gy(N * C, 0);
  DeviceBuffer<float> gmean(N, 0.f), grstd(N, 0.f), gdw(to_f32(dw0)), gdb(to_f32(db0)),
      scratch(cuda::layernorm_backward_scratch(N, C), 0.f);
  const uint16_t* gwp = affine ? gw_in.get() : nullptr;
  cuda::layernorm_forward({.x = gx_in.get(),
                           .w = gwp,
                           .b = affine ? gb_in.get() : nullptr,
                           .y = gy.get(),
                           .mean = gmean.get(),
                           .rstd = grstd.get(),
                           .N = N,
                           .C = C,
                           .eps = kEps},
                          nullptr);
  cuda::layernorm_backward({.x = gx_in.get(),
                            .w = gwp,
                            .mean = gmean.get(),
                            .rstd = grstd.get(),
                            .dy = gdy.get(),
                            .dx = gdx.get(),
                            .dw = gdw.get(),
                            .db = gdb.get(),
                            .N = N,
                            .C = C},
                           scratch.launch());
  expect_close("y", widen(gy.read()), y, kBf16Tol);
  expect_close("mean", gmean.read(), mean, kDeviceF32Tol);
  expect_close("rstd", grstd.read(), rstd, kDeviceF32Tol);
  expect_close("dx", widen(gdx.read()), dx, kBf16Tol);
  expect_close("dw", gdw.read(), dw, kDeviceF32Tol);  // unchanged without affine
  expect_close("db", gdb.read(), db, kDeviceF32Tol);
}

TEST(CudaOps, LayerNormAffineMatchesCpuReference) {
  MS_REQUIRE_GPU();
  check_layernorm(true);
}

TEST(CudaOps, LayerNormPlainMatchesCpuReference) {
  MS_REQUIRE_GPU();
  check_layernorm(false);
}

// forward_gpu / backward_gpu on T (bf16 bits or fp32) against forward_cpu / backward_cpu in float64 on n elements.
template <class T>
using PointwiseGpu = void (*)(const ActivationParams<T>&, cuda::Stream);
using PointwiseCpu = void (*)(const ActivationParams<double>&);

template <class T>
void check_pointwise(PointwiseGpu<T> forward_gpu, PointwiseGpu<T> backward_gpu, PointwiseCpu forward_cpu,
                     PointwiseCpu backward_cpu) {
  const int64_t n = 100003;
  auto x = random_bf16(static_cast<size_t>(n), 21, 3.0), dy = random_bf16(static_cast<size_t>(n), 22),
       dx0 = random_bf16(static_cast<size_t>(n), 23, kAccumulateScale);
  std::vector<double> y(static_cast<size_t>(n)), dx = dx0.values;
  forward_cpu({.x = x.values.data(), .y = y.data(), .n = n});
  backward_cpu({.x = x.values.data(), .dy = dy.values.data(), .dx = dx.data(), .n = n});
  auto device = [](const Bf16Input& v) {
    if constexpr (std::is_same_v<T, float>)
      return to_f32(v.values);
    else
      return v.bits;
  };
  DeviceBuffer<T> gx(device(x)), gdy(device(dy)), gdx(device(dx0)), gy(n, T(0));
  forward_gpu({.x = gx.get(), .y = gy.get(), .n = n}, nullptr);
  backward_gpu({.x = gx.get(), .dy = gdy.get(), .dx = gdx.get(), .n = n}, nullptr);
  // bf16 outputs: one rounding (kBf16Tol); fp32 outputs: fp32 arithmetic with __expf (kDeviceF32Tol).
  const double tol = std::is_same_v<T, float> ? kDeviceF32Tol : kBf16Tol;
  if constexpr (std::is_same_v<T, float>) {
    expect_close("y", gy.read(), y, tol);
    expect_close("dx", gdx.read(), dx, tol);
  } else {
    expect_close("y", widen(gy.read()), y, tol);
    expect_close("dx", widen(gdx.read()), dx, tol);
  }
}

TEST(CudaOps, GeluTanhMatchesCpuReference) {
  MS_REQUIRE_GPU();
  check_pointwise<uint16_t>(cuda::gelu_tanh_forward, cuda::gelu_tanh_backward, cpu::gelu_tanh_forward<double>,
                            cpu::gelu_tanh_backward<double>);
}

TEST(CudaOps, SiluMatchesCpuReference) {
  MS_REQUIRE_GPU();
  check_pointwise<uint16_t>(cuda::silu_forward, cuda::silu_backward, cpu::silu_forward<double>,
                            cpu::silu_backward<double>);
}

// The time path's SiLU on fp32 tensors.
TEST(CudaOps, SiluOnFp32MatchesCpuReference) {
  MS_REQUIRE_GPU();
  check_pointwise<float>(cuda::silu_forward, cuda::silu_backward, cpu::silu_forward<double>,
                         cpu::silu_backward<double>);
}

// Every transpose case, odd sizes, beta = 1 (gradient accumulation) into fp32 and beta = 0 into bf16.
TEST(CudaOps, GemmMatchesCpuReferenceForEveryTranspose) {
  MS_REQUIRE_GPU();
  const int64_t M = 67, N = 45, K = 131;
  cuda::GemmContext ctx;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(testing::Message() << "ta " << ta << " tb " << tb);
      auto a = random_bf16(static_cast<size_t>(M * K), 31), b = random_bf16(static_cast<size_t>(K * N), 32);
      const std::vector<double> c0 = randn(static_cast<size_t>(M * N), 33);
      const int64_t lda = ta ? M : K, ldb = tb ? K : N;
      std::vector<double> acc = c0, fresh(static_cast<size_t>(M * N));
      reference_gemm(ta, tb, M, N, K, 0.5, a.values, lda, b.values, ldb, 1.0, acc);
      reference_gemm(ta, tb, M, N, K, 1.0, a.values, lda, b.values, ldb, 0.0, fresh);
      DeviceBuffer<uint16_t> ga(a.bits), gb(b.bits), gc16(M * N, 0x7fc0);  // NaN poison
      DeviceBuffer<float> gc32(to_f32(c0));
      ctx.gemm<float>(ta, tb, M, N, K, 0.5f, ga.get(), lda, gb.get(), ldb, 1.f, gc32.get(), N, nullptr);
      ctx.gemm<uint16_t>(ta, tb, M, N, K, 1.f, ga.get(), lda, gb.get(), ldb, 0.f, gc16.get(), N, nullptr);
      expect_close(std::string("f32_accumulate_") + (ta ? "t" : "n") + (tb ? "t" : "n"), gc32.read(), acc,
                   kDeviceF32Tol);
      expect_close(std::string("bf16_") + (ta ? "t" : "n") + (tb ? "t" : "n"), widen(gc16.read()), fresh, kBf16Tol);
    }
}

// A strided batch as the text encoder's attention uses it: 5 heads whose matrices interleave as column blocks of one
// matrix each for A, B and C (q k^T: interleaved q and k, k transposed; p v: interleaved v and y), every transpose,
// against each product in plain loops.
TEST(CudaOps, BatchedGemmOverInterleavedHeadsMatchesEachProduct) {
  MS_REQUIRE_GPU();
  const int64_t heads = 5, M = 29, N = 13, K = 37;
  cuda::GemmContext ctx;
  // head h's rows x cols matrix, stored as columns h * cols.. of a [rows, heads x cols] matrix, packed
  const auto head = [&](const std::vector<double>& all, int64_t rows, int64_t cols, int64_t h) {
    std::vector<double> one(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) one[size_t(r * cols + c)] = all[size_t(r * heads * cols + h * cols + c)];
    return one;
  };
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(testing::Message() << "ta " << ta << " tb " << tb);
      const int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;  // stored extents
      auto a = random_bf16(static_cast<size_t>(heads * M * K), 41);
      auto b = random_bf16(static_cast<size_t>(heads * N * K), 42);
      std::vector<double> want(static_cast<size_t>(M * heads * N));
      for (int64_t h = 0; h < heads; ++h) {
        std::vector<double> ch(static_cast<size_t>(M * N));
        reference_gemm(ta, tb, M, N, K, 1.0, head(a.values, ar, ac, h), ac, head(b.values, br, bc, h), bc, 0.0, ch);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) want[size_t(m * heads * N + h * N + n)] = ch[size_t(m * N + n)];
      }
      DeviceBuffer<uint16_t> ga(a.bits), gb(b.bits);
      DeviceBuffer<float> gc(M * heads * N, std::nanf(""));
      ctx.gemm<float>(ta, tb, M, N, K, 1.f, ga.get(), heads * ac, gb.get(), heads * bc, 0.f, gc.get(), heads * N,
                      nullptr, nullptr, {heads, ac, bc, N});
      expect_close(std::string("batched_") + (ta ? "t" : "n") + (tb ? "t" : "n"), gc.read(), want, kDeviceF32Tol);
    }
}

}  // namespace
}  // namespace ms::test
