#include "ops/rope.h"

#include <cmath>
#include <vector>

#include "core/parallel.h"

namespace ms::cpu {

namespace {

// cos and sin of pos * 10000^(-2i/(2n)) for pos in [0, P), pair i in [0, n): two tables [P, n].
struct AxisTable {
  std::vector<double> cos, sin;
  AxisTable(int64_t P, int64_t n) : cos(P * n), sin(P * n) {
    for (int64_t i = 0; i < n; ++i) {
      const double freq = 1.0 / std::pow(10000.0, double(2 * i) / double(2 * n));
      for (int64_t p = 0; p < P; ++p) {
        const double a = double(p) * freq;
        cos[p * n + i] = std::cos(a);
        sin[p * n + i] = std::sin(a);
      }
    }
  }
};

// y = x rotated pairwise by sign * angle (sign +1: forward, -1: its transpose). y may alias x.
template <class T>
void rope_rotate(const T* x, T* y, int64_t B, int64_t F, int64_t H, int64_t W, int64_t nh, int64_t d, double sign) {
  const int64_t c = d / 2, nw = c / 3, nhp = c / 3, nf = c - 2 * (c / 3);
  const AxisTable tf(F, nf), th(H, nhp), tw(W, nw);
  parallel_for(
      B * F * H * W,
      [&](int64_t tok) {
        const int64_t w = tok % W, h = (tok / W) % H, f = (tok / (W * H)) % F;
        // Rotates pairs [p0, p0 + n) of every head by table row `pos`.
        auto rotate_part = [&](const AxisTable& t, int64_t pos, int64_t p0, int64_t n) {
          const double* cs = t.cos.data() + pos * n;  // [n]
          const double* sn = t.sin.data() + pos * n;  // [n]
          for (int64_t head = 0; head < nh; ++head) {
            const T* xr = x + (tok * nh + head) * d + 2 * p0;  // [2n]
            T* yr = y + (tok * nh + head) * d + 2 * p0;        // [2n]
            for (int64_t i = 0; i < n; ++i) {
              const double re = xr[2 * i], im = xr[2 * i + 1], s = sign * sn[i];
              yr[2 * i] = T(re * cs[i] - im * s);
              yr[2 * i + 1] = T(re * s + im * cs[i]);
            }
          }
        };
        rotate_part(tf, f, 0, nf);
        rotate_part(th, h, nf, nhp);
        rotate_part(tw, w, nf + nhp, nw);
      },
      4);
}

}  // namespace

template <class T>
void rope_forward(const RopeParams<T>& p) {
  rope_rotate(p.x, p.y, p.B, p.F, p.H, p.W, p.nh, p.d, 1.0);
}

template <class T>
void rope_backward(const RopeParams<T>& p) {
  rope_rotate(p.dy, p.dx, p.B, p.F, p.H, p.W, p.nh, p.d, -1.0);
}

template void rope_forward<float>(const RopeParams<float>&);
template void rope_forward<double>(const RopeParams<double>&);
template void rope_backward<float>(const RopeParams<float>&);
template void rope_backward<double>(const RopeParams<double>&);

}  // namespace ms::cpu
