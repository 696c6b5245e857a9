#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/rope.h"

namespace ms::cuda {
namespace {

// One thread per complex pair (x[2i], x[2i+1]) of every head of every token: rotated by sign * angle, the
// angle pos * 10000^(-2j/(2n)) of the pair's axis part (j its index in the part of n pairs).
__global__ void rope_kernel(const uint16_t* x, uint16_t* y, int64_t F, int64_t H, int64_t W, int64_t nh, int64_t d,
                            int64_t pairs, double sign) {
  const int64_t c = d / 2, nw = c / 3, nhp = c / 3, nf = c - 2 * (c / 3);
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < pairs; p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = p % c, tok = p / (c * nh);
    const int64_t w = tok % W, h = (tok / W) % H, f = (tok / (W * H)) % F;
    int64_t pos, j, n;
    if (i < nf)
      pos = f, j = i, n = nf;
    else if (i < nf + nhp)
      pos = h, j = i - nf, n = nhp;
    else
      pos = w, j = i - nf - nhp, n = nw;
    const double a = double(pos) / pow(10000.0, double(2 * j) / double(2 * n));
    double s, co;
    sincos(a, &s, &co);
    s *= sign;
    const double re = load(x, 2 * p), im = load(x, 2 * p + 1);
    store(y, 2 * p, float(re * co - im * s));
    store(y, 2 * p + 1, float(re * s + im * co));
  }
}

void rotate(const uint16_t* x, uint16_t* y, int64_t B, int64_t F, int64_t H, int64_t W, int64_t nh, int64_t d,
            double sign, Stream stream) {
  MS_CHECK(d % 2 == 0, "rope: head dim ", d, " must be even");
  const int64_t pairs = B * F * H * W * nh * (d / 2);
  rope_kernel<<<elementwise_blocks(pairs), 256, 0, stream>>>(x, y, F, H, W, nh, d, pairs, sign);
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace

void rope_forward(const RopeParams<uint16_t>& p, Stream stream) {
  rotate(p.x, p.y, p.B, p.F, p.H, p.W, p.nh, p.d, 1.0, stream);
}

void rope_backward(const RopeParams<uint16_t>& p, Stream stream) {
  rotate(p.dy, p.dx, p.B, p.F, p.H, p.W, p.nh, p.d, -1.0, stream);
}

}  // namespace ms::cuda
