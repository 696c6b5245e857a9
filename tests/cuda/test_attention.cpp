// The CUDA attention kernels against float64 loops (softmax written out): the flash-style kernels (head dims up
// to 128) on self- and cross-attention shapes, partial and several 64-row tiles, head dims padded to the 16 of
// the tensor-core tiles; the plain kernel (wider heads) on key counts over one chunk and head dims over its
// threads. The flash kernels round the probabilities and their gradients to bf16 before the products (2^-9
// relative each, averaged over the keys), inside the tolerances below. Skipped without a GPU.
#include <array>
#include <functional>

#include "backend/cuda/attention.h"
#include "backend/cuda/window_attention.h"
#include "cuda_util.h"
#include "model_reference.h"
#include "ops/attention.h"
#include "ops/window_attention.h"
#include "reference_ops.h"

namespace ms::test {
namespace {

// Runs the CUDA forward (out, lse) and backward (dq, dk, dv +=) on device buffers.
using GpuAttention = std::function<void(const AttentionTensors<uint16_t, float>& t, const cuda::Launch& l)>;

void check(const AttentionDims& a, uint64_t seed, const GpuAttention& gpu, const AttentionMask& allowed) {
  const size_t nq = static_cast<size_t>(a.B * a.Lq * a.nh * a.d), nk = static_cast<size_t>(a.B * a.Lk * a.nh * a.d);
  auto q = random_bf16(nq, seed, 2.0), k = random_bf16(nk, seed + 1, 2.0), v = random_bf16(nk, seed + 2),
       dout = random_bf16(nq, seed + 3), dq0 = random_bf16(nq, seed + 4, kAccumulateScale),
       dk0 = random_bf16(nk, seed + 5, kAccumulateScale), dv0 = random_bf16(nk, seed + 6, kAccumulateScale);
  const AttentionReference ref =
      reference_attention(a, q.values, k.values, v.values, dout.values, dq0.values, dk0.values, dv0.values, allowed);
  DeviceBuffer<uint16_t> gq(q.bits), gk(k.bits), gv(v.bits), gdout(dout.bits), gdq(dq0.bits), gdk(dk0.bits),
      gdv(dv0.bits), gout(std::vector<uint16_t>(nq, 0x7fc0));
  DeviceBuffer<float> glse(std::vector<float>(ref.lse.size(), -1.f)), scratch(cuda::attention_backward_scratch(a), 0.f);
  gpu({gq.get(), gk.get(), gv.get(), gout.get(), glse.get(), gdout.get(), gdq.get(), gdk.get(), gdv.get()},
      scratch.launch());
  expect_close("out", widen(gout.read()), ref.out, kBf16Tol);
  expect_close("lse", glse.read(), ref.lse, kDeviceF32Tol);
  // The backward reads the bf16-rounded out (as the model does): its delta term carries that rounding.
  expect_close("dq", widen(gdq.read()), ref.dq, 2 * kBf16Tol);
  expect_close("dk", widen(gdk.read()), ref.dk, 2 * kBf16Tol);
  expect_close("dv", widen(gdv.read()), ref.dv, kBf16Tol);
}

// Dense attention.
void check(const AttentionDims& a, uint64_t seed) {
  check(
      a, seed,
      [&](const AttentionTensors<uint16_t, float>& t, const cuda::Launch& l) {
        cuda::attention_forward({t, a}, l);
        cuda::attention_backward({t, a}, l);
      },
      nullptr);
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

// Window attention: the flash kernels per cell against dense attention masked to Video Swin's cells (tests/
// reference_model.h), divisible and not, shifted and not, even windows, a window longer than the grid on one axis,
// cells over one 64-row tile.
TEST(CudaAttention, WindowMatchesMaskedFloat64Loops) {
  MS_REQUIRE_GPU();
  struct Case {
    VideoAttentionDims d;
    std::array<int64_t, 3> window;
    bool shifted;
  };
  const Case cases[] = {{{2, 4, 4, 6, 2, 12}, {2, 2, 3}, false},
                        {{2, 4, 4, 6, 2, 12}, {2, 2, 3}, true},
                        {{1, 5, 6, 7, 3, 40}, {2, 4, 3}, true},
                        {{1, 3, 7, 5, 2, 16}, {4, 3, 2}, true},
                        {{1, 4, 9, 10, 1, 64}, {4, 8, 8}, true}};
  uint64_t seed = 130;
  for (const Case& k : cases) {
    const AttentionDims a{k.d.B, k.d.L(), k.d.L(), k.d.nh, k.d.d};
    check(
        a, seed += 10,
        [&](const AttentionTensors<uint16_t, float>& t, const cuda::Launch& l) {
          cuda::window_attention_forward({t, k.d, k.window, k.shifted}, l);
          cuda::window_attention_backward({t, k.d, k.window, k.shifted}, l);
        },
        swin_mask(k.d, k.window, k.shifted));
  }
}

}  // namespace
}  // namespace ms::test
