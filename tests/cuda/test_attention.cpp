// The CUDA attention kernels against float64 loops (softmax written out): the flash-style kernels (head dims up
// to 128) on self- and cross-attention shapes, partial and several 64-row tiles, head dims padded to the 16 of
// the tensor-core tiles; the plain kernel (wider heads) on key counts over one chunk and head dims over its
// threads. The flash kernels round the probabilities and their gradients to bf16 before the products (2^-9
// relative each, averaged over the keys), inside the tolerances below. Skipped without a GPU.
#include "cuda_util.h"
#include "ops/attention.h"
#include "reference_ops.h"

namespace ms::test {
namespace {

void check(const cpu::AttentionDims& a, uint64_t seed) {
  const size_t nq = static_cast<size_t>(a.B * a.Lq * a.nh * a.d), nk = static_cast<size_t>(a.B * a.Lk * a.nh * a.d);
  auto q = random_bf16(nq, seed, 2.0), k = random_bf16(nk, seed + 1, 2.0), v = random_bf16(nk, seed + 2),
       dout = random_bf16(nq, seed + 3), dq0 = random_bf16(nq, seed + 4, kAccumulateScale),
       dk0 = random_bf16(nk, seed + 5, kAccumulateScale), dv0 = random_bf16(nk, seed + 6, kAccumulateScale);
  const AttentionReference ref =
      reference_attention(a, q.values, k.values, v.values, dout.values, dq0.values, dk0.values, dv0.values);
  DeviceBuffer<uint16_t> gq(q.bits), gk(k.bits), gv(v.bits), gdout(dout.bits), gdq(dq0.bits), gdk(dk0.bits),
      gdv(dv0.bits), gout(std::vector<uint16_t>(nq, 0x7fc0));
  DeviceBuffer<float> glse(std::vector<float>(ref.lse.size(), -1.f)), scratch(cuda::attention_backward_scratch(a), 0.f);
  cuda::attention_forward(gq.get(), gk.get(), gv.get(), gout.get(), glse.get(), a, nullptr);
  cuda::attention_backward(gq.get(), gk.get(), gv.get(), gout.get(), glse.get(), gdout.get(), gdq.get(), gdk.get(),
                           gdv.get(), scratch.get(), a, nullptr);
  expect_close("out", widen(gout.read()), ref.out, kBf16Tol);
  expect_close("lse", glse.read(), ref.lse, kDeviceF32Tol);
  // The backward reads the bf16-rounded out (as the model does): its delta term carries that rounding.
  expect_close("dq", widen(gdq.read()), ref.dq, 2 * kBf16Tol);
  expect_close("dk", widen(gdk.read()), ref.dk, 2 * kBf16Tol);
  expect_close("dv", widen(gdv.read()), ref.dv, kBf16Tol);
}

TEST(CudaAttention, SelfAttentionMatchesFloat64Loops) {
  MS_REQUIRE_GPU();
  check({2, 67, 67, 3, 40}, 61);
}

TEST(CudaAttention, CrossAttentionMatchesFloat64Loops) {
  MS_REQUIRE_GPU();
  check({2, 53, 19, 2, 40}, 71);
}

// Flash tiles: a head dim of 12 padded to 16, Wan's 128, and lengths of several 64-row tiles with a partial last
// one, queries and keys of different counts.
TEST(CudaAttention, FlashTilesMatchFloat64Loops) {
  MS_REQUIRE_GPU();
  check({2, 37, 29, 2, 12}, 101);
  check({1, 130, 77, 2, 128}, 111);
  check({1, 200, 333, 1, 64}, 121);
}

// The plain kernel (head dims over 128). 300 keys (or queries): three chunks of the kernel's 128 in the forward
// and dq (or dk, dv) loops; head dim 200: two channels per thread.
TEST(CudaAttention, LongKeysAndWideHeadsMatchFloat64Loops) {
  MS_REQUIRE_GPU();
  check({1, 9, 300, 2, 200}, 81);
  check({1, 300, 9, 2, 200}, 91);
}

}  // namespace
}  // namespace ms::test
