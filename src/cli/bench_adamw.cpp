// `megaslide bench adamw`: the fused CPU AdamW pass against the memory bandwidth measured in the same run.
//
// AdamW is memory-bound: per parameter it reads grad, master, exp_avg, exp_avg_sq (4 x 4 bytes) and
// writes master, exp_avg, exp_avg_sq (3 x 4) and the bf16 weight (2): 30 bytes. The ceiling is a kernel
// with exactly that read/write mix and no arithmetic to speak of, on the same arrays, threads and
// chunks, so fraction_of_ceiling isolates the cost of the optimizer math and of the SIMD code. Every
// kernel here writes values that differ from those in memory: rewriting unchanged values runs faster
// and would overstate the ceiling (docs/benchmarks.md). A STREAM triad (a = b + s*c, counted as 12
// bytes per element as STREAM does) is reported beside it for comparison with the usual number; it
// counts no write-allocate reads and has another read/write mix, so it is not the ceiling.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/aligned.h"
#include "core/check.h"
#include "core/parallel.h"
#include "train/adamw.h"

namespace ms::cli {
namespace {

constexpr int64_t kChunk = 1 << 15;  // elements per parallel task, as in adamw_update
constexpr int64_t kBytesPerParam = 4 * 4 + 3 * 4 + 2;
constexpr int64_t kTriadBytesPerElement = 3 * 4;

struct BenchAdamWArgs {
  int64_t params = int64_t(64) << 20;  // 1.9 GB of arrays: far beyond the caches
  int reps = 5;
  bool json = false;
};

// Calls fn(begin, end) over [0, n) in kChunk pieces on every thread.
template <class F>
void for_chunks(int64_t n, F&& fn) {
  parallel_for((n + kChunk - 1) / kChunk, [&](int64_t c) { fn(c * kChunk, std::min(n, (c + 1) * kChunk)); });
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// AdamW's memory traffic without its arithmetic, on [0, n): flips the sign of master and m and the low
// bit of v (two calls restore the values) and writes bits of master ^ grad as the bf16 weights.
void same_mix(uint32_t sign, uint32_t low, const float* __restrict grad, float* __restrict master, float* __restrict m,
              float* __restrict v, uint16_t* __restrict w, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t p = bits_of(master[i]) ^ sign;
    master[i] = from_bits(p);
    m[i] = from_bits(bits_of(m[i]) ^ sign);
    v[i] = from_bits(bits_of(v[i]) ^ low);
    w[i] = uint16_t((p ^ bits_of(grad[i])) >> 16);
  }
}

// STREAM triad on [0, n); callers vary s so that every call writes new values.
void triad(float s, float* __restrict a, const float* __restrict b, const float* __restrict c, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

template <class F>
double seconds(F&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void bench_adamw(const BenchAdamWArgs& a) {
  if (a.params < 1) MS_FAIL("--params must be >= 1, got ", a.params);
  if (a.reps < 1) MS_FAIL("--reps must be >= 1, got ", a.reps);
  const int64_t n = a.params;
  const size_t un = size_t(n);
  AlignedBuffer<float> grad(un), master(un), m(un), v(un);  // [n] each
  AlignedBuffer<uint16_t> weights(un);                      // [n] bf16 bits
  AlignedBuffer<float> ta(un), tb(un), tc(un);              // [n] triad arrays
  for_chunks(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      grad[size_t(i)] = float(int64_t(uint32_t(i) * 2654435761u >> 22) - 512) / 512.0f;  // in [-1, 1)
      master[size_t(i)] = 0.5f * grad[size_t(i)];
      v[size_t(i)] = 1e-4f;  // normal, and it stays so: same_mix flips only its lowest bit
      tb[size_t(i)] = 1.0f;
      tc[size_t(i)] = 2.0f;
    }
  });
  const AdamWConfig cfg;
  // The kernels take turns within each repetition so that a change in machine load hits all alike.
  double t_adamw = 1e30, t_mix = 1e30, t_triad = 1e30;
  for (int rep = 0; rep <= a.reps; ++rep) {  // rep 0 warms up
    const double s_adamw = seconds([&] {
      adamw_update(cfg, 1e-4, rep + 1, 1.0f, grad.data(), master.data(), m.data(), v.data(), weights.data(), n);
    });
    const double s_mix = seconds([&] {
      for_chunks(n, [&](int64_t b, int64_t e) {
        same_mix(0x80000000u, 1u, grad.data() + b, master.data() + b, m.data() + b, v.data() + b, weights.data() + b,
                 e - b);
      });
    });
    const double s_triad = seconds([&] {
      for_chunks(n, [&](int64_t b, int64_t e) {
        triad(0.5f + float(rep), ta.data() + b, tb.data() + b, tc.data() + b, e - b);
      });
    });
    if (rep == 0) continue;
    t_adamw = std::min(t_adamw, s_adamw);
    t_mix = std::min(t_mix, s_mix);
    t_triad = std::min(t_triad, s_triad);
  }
  const double bytes = double(kBytesPerParam) * double(n);
  const double gbps = bytes / t_adamw / 1e9, ceiling = bytes / t_mix / 1e9;
  const double triad_gbps = double(kTriadBytesPerElement) * double(n) / t_triad / 1e9;
  const nlohmann::json r{{"params", n},
                         {"threads", num_threads()},
                         {"simd_target", adamw_simd_target()},
                         {"reps", a.reps},
                         {"bytes_per_param", kBytesPerParam},
                         {"bytes_per_step", bytes},
                         {"seconds_per_step", t_adamw},
                         {"gbps", gbps},
                         {"ceiling_kernel", "same read/write mix as AdamW, no arithmetic"},
                         {"ceiling_gbps", ceiling},
                         {"fraction_of_ceiling", gbps / ceiling},
                         {"triad_gbps", triad_gbps},
                         {"fraction_of_triad", gbps / triad_gbps}};
  if (a.json) {
    std::printf("%s\n", r.dump(2).c_str());
    return;
  }
  std::printf("bench adamw: %lld params, %d threads, %s, best of %d\n", static_cast<long long>(n), num_threads(),
              adamw_simd_target(), a.reps);
  std::printf("  seconds/step         %10.4f\n", t_adamw);
  std::printf("  bytes/step           %10.3g  (%lld B/param: read 4 f32, write 3 f32 + 1 bf16)\n", bytes,
              static_cast<long long>(kBytesPerParam));
  std::printf("  AdamW GB/s           %10.2f\n", gbps);
  std::printf("  ceiling GB/s         %10.2f  (same read/write mix, no arithmetic, same run)\n", ceiling);
  std::printf("  fraction of ceiling  %10.3f\n", gbps / ceiling);
  std::printf("  triad GB/s           %10.2f  (a = b + s*c, 12 B/element, same run; fraction %.3f)\n", triad_gbps,
              gbps / triad_gbps);
}

}  // namespace

void add_bench_adamw(CLI::App& bench) {
  auto a = std::make_shared<BenchAdamWArgs>();
  CLI::App* cmd = bench.add_subcommand("adamw", "CPU AdamW GB/s against the memory bandwidth of the same run");
  cmd->add_option("--params", a->params, "Parameters per step (allocates 30 bytes each: AdamW state and triad arrays)")
      ->capture_default_str();
  cmd->add_option("--reps", a->reps, "Timed repetitions (best is kept)")->capture_default_str();
  cmd->add_flag("--json", a->json, "Print one JSON object");
  cmd->callback([a] { bench_adamw(*a); });
}

}  // namespace ms::cli
