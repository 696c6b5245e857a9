// `megaslide bench attention`: forward + backward time and peak extra memory of the self-attention types at
// growing token counts, and how each scales: time(8N) / time(N) is 64 for quadratic, 8 for linear cost.
// window runs its shifted (odd-block) variant; dsa gets random offsets up to the default offset_range.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/gemm.h"
#include "cli/ceilings.h"
#include "cli/commands.h"
#include "core/check.h"
#include "core/memory_usage.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "model/attention_core.h"
#include "model/flops.h"

namespace ms::cli {
namespace {

const std::vector<std::string> kTypes = {"dense", "window", "dsa_fixed", "dsa"};

struct BenchAttentionArgs {
  int64_t max_tokens = 65536;        // largest grid to run
  int64_t dense_max_tokens = 16384;  // dense above this would take minutes: skipped, with a note
  int64_t heads = 4, head_dim = 32;
  int64_t repeat = 5;   // interleaved rounds; the fastest run of a row counts
  double budget_s = 3;  // seconds of runs per row, spread over the rounds
  std::vector<std::string> types = kTypes;
  bool json = false;
};

// Token grids (t, h, w) from 1k to 64k tokens, growing frames and area; each is 2x the previous.
constexpr int64_t kGrids[][3] = {{4, 16, 16},  {8, 16, 16},  {8, 16, 32}, {8, 32, 32},
                                 {16, 32, 32}, {16, 32, 64}, {16, 64, 64}};
constexpr std::array<int64_t, 3> kWindow{3, 3, 3};
constexpr std::array<double, 3> kOffsetRange{1.0, 2.0, 2.0};

struct Row {
  std::string type;
  int64_t t, h, w, tokens;
  double fwd_ms, bwd_ms;
  int64_t extra_bytes;  // peak RSS during forward + backward over the RSS with every tensor allocated; -1 unknown
  double flops;         // model FLOPs of forward + backward (model_flops)
};

// Forward + backward model FLOPs of one layer's core: the forward as model/flops.h counts it (4 per query-key pair
// and head-dim channel, dsa 8 times that), the backward 2.5 forwards (dense attention's GEMMs: 2 in the forward, 5
// in the backward).
double model_flops(const AttentionSpec& s) {
  AttentionConfig a;
  a.type = s.type, a.window = s.window;
  const VideoAttentionDims& d = s.dims;
  return 3.5 * double(d.L() * d.nh * d.d) * self_attention_forward_flops(a, {d.T, d.H, d.W});
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// One row's inputs, outputs and gradients, allocated once, and its fastest forward and backward so far.
class Case {
 public:
  Case(const std::string& type, const int64_t grid[3], const BenchAttentionArgs& a)
      : spec_{.type = parse_name<AttentionType>(type, "--types"),
              .dims = {.B = 1, .T = grid[0], .H = grid[1], .W = grid[2], .nh = a.heads, .d = a.head_dim},
              .window = kWindow,
              .shifted = true,
              .groups = a.heads} {
    const VideoAttentionDims& d = spec_.dims;
    const size_t n = size_t(d.L() * d.nh * d.d),
                 noff = size_t(d.L() * spec_.groups * kWindow[0] * kWindow[1] * kWindow[2] * 3);
    Rng rng(uint64_t(d.L()));
    auto random = [&](size_t count, double scale) {
      std::vector<float> v(count);
      for (auto& x : v) x = float(scale * rng.uniform(-1, 1));
      return v;
    };
    // q, k, v, dout, offsets [1, t, h, w, nh, d] / [1, t, h, w, G, P, 3]; outputs and grads zero-filled (touched).
    q_ = random(n, 1), k_ = random(n, 1), v_ = random(n, 1), dout_ = random(n, 1);
    if (type == "dsa") off_ = random(noff, 1);
    for (size_t i = 0; i < off_.size(); ++i) off_[i] *= float(kOffsetRange[i % 3]);
    out_.resize(n), lse_.resize(size_t(d.L() * d.nh)), dq_.resize(n), dk_.resize(n), dv_.resize(n);
    doff_.resize(off_.size());
    row_ = {type, grid[0], grid[1], grid[2], d.L(), 1e300, 1e300, -1, model_flops(spec_)};
  }

  // One forward + backward: keeps the fastest of each and the largest extra memory. Returns its milliseconds.
  double run() {
    const float* offp = off_.empty() ? nullptr : off_.data();
    const bool peak = reset_peak_resident();
    const int64_t base = resident_bytes();
    CpuOps<float> ops;
    const AttentionTensors<float> t{q_.data(),    k_.data(),  v_.data(),  out_.data(), lse_.data(),
                                    dout_.data(), dq_.data(), dk_.data(), dv_.data()};
    auto t0 = std::chrono::steady_clock::now();
    attention_forward(ops, spec_, t, offp);
    const double f = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    attention_backward(ops, spec_, t, offp, offp ? doff_.data() : nullptr);
    const double b = ms_since(t0);
    const int64_t hwm = peak_resident_bytes();
    if (peak && base >= 0 && hwm >= 0) row_.extra_bytes = std::max(row_.extra_bytes, std::max<int64_t>(0, hwm - base));
    row_.fwd_ms = std::min(row_.fwd_ms, f);
    row_.bwd_ms = std::min(row_.bwd_ms, b);
    spent_ms_ += f + b;
    return f + b;
  }

  const Row& row() const { return row_; }
  double spent_ms() const { return spent_ms_; }

 private:
  AttentionSpec spec_;  // window runs its shifted (odd-block) variant
  std::vector<float> q_, k_, v_, dout_, off_, out_, lse_, dq_, dk_, dv_, doff_;
  Row row_;
  double spent_ms_ = 0;
};

// The rows of one type, measured in interleaved rounds so that every size sees the same moments of a machine whose
// speed drifts: each round runs each row for budget / repeat seconds (at least once), until the row has run for
// the budget. A row's time is its fastest run.
std::vector<Row> run_type(const std::string& type, const BenchAttentionArgs& a, std::vector<std::string>& notes) {
  std::vector<std::unique_ptr<Case>> cases;
  for (const auto& g : kGrids) {
    const int64_t tokens = g[0] * g[1] * g[2];
    if (tokens > a.max_tokens) break;
    if (type == "dense" && tokens > a.dense_max_tokens) {
      notes.push_back(cat("dense skipped at ", tokens, " tokens (> --dense-max-tokens ", a.dense_max_tokens, ")"));
      continue;
    }
    cases.push_back(std::make_unique<Case>(type, g, a));
  }
  const double budget_ms = a.budget_s * 1e3, slice_ms = budget_ms / double(a.repeat);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t round = 0; round < a.repeat; ++round) {
    for (auto& c : cases) {
      if (c->spent_ms() >= budget_ms) continue;
      for (double ms = 0; ms < slice_ms;) ms += c->run();
    }
    if (!a.json)
      std::fprintf(stderr, "  %-9s round %lld of %lld: %.0f s\n", type.c_str(), static_cast<long long>(round + 1),
                   static_cast<long long>(a.repeat), ms_since(t0) / 1e3);
  }
  std::vector<Row> rows;
  for (const auto& c : cases) rows.push_back(c->row());
  return rows;
}

void bench_attention(const BenchAttentionArgs& a) {
  if (a.heads <= 0 || a.head_dim <= 0) MS_FAIL("bench attention: --heads and --head-dim must be positive");
  if (a.repeat <= 0 || !(a.budget_s > 0))
    MS_FAIL("bench attention: --repeat (", a.repeat, ") and --budget (", a.budget_s, ") must be positive");
  const double sgemm = measure_sgemm_rate(2048);
  std::vector<Row> rows;
  std::vector<std::string> notes;
  for (const std::string& type : a.types) {
    const auto r = run_type(type, a, notes);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) { return x.tokens < y.tokens; });
  // time(8N) / time(N) for every pair of rows of one type three doublings apart.
  std::map<std::pair<std::string, int64_t>, double> total;
  for (const auto& r : rows) total[{r.type, r.tokens}] = r.fwd_ms + r.bwd_ms;
  nlohmann::json scaling = nlohmann::json::array();
  for (const auto& r : rows) {
    auto it = total.find({r.type, 8 * r.tokens});
    if (it != total.end())
      scaling.push_back({{"type", r.type}, {"tokens", r.tokens}, {"ratio_8x", it->second / (r.fwd_ms + r.bwd_ms)}});
  }
  if (a.json) {
    nlohmann::json j{{"heads", a.heads},
                     {"head_dim", a.head_dim},
                     {"window", kWindow},
                     {"threads", num_threads()},
                     {"repeat", a.repeat},
                     {"window_shifted", true},
                     {"sgemm_flops_per_second", sgemm},
                     {"sgemm_kernels", cpu::openblas_coretype()},
                     {"rows", nlohmann::json::array()},
                     {"scaling", scaling},
                     {"notes", notes}};
    for (const auto& r : rows)
      j["rows"].push_back({{"type", r.type},
                           {"grid", {r.t, r.h, r.w}},
                           {"tokens", r.tokens},
                           {"forward_ms", r.fwd_ms},
                           {"backward_ms", r.bwd_ms},
                           {"extra_bytes", r.extra_bytes},
                           {"model_flops", r.flops},
                           {"fraction_of_sgemm", r.flops / ((r.fwd_ms + r.bwd_ms) * 1e-3) / sgemm}});
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf(
      "bench attention: batch 1, %lld heads x %lld dims, window %lldx%lldx%lld, %d threads, float32, "
      "fastest run of %lld interleaved rounds (%.0f s per row)\n",
      static_cast<long long>(a.heads), static_cast<long long>(a.head_dim), static_cast<long long>(kWindow[0]),
      static_cast<long long>(kWindow[1]), static_cast<long long>(kWindow[2]), num_threads(),
      static_cast<long long>(a.repeat), a.budget_s);
  std::printf(
      "  sgemm ceiling %.1f GFLOP/s (2048^3, same run; OpenBLAS %s kernels); GFLOP/s counts model FLOPs (see "
      "model_flops)\n",
      sgemm / 1e9, cpu::openblas_coretype());
  std::printf("  %-9s %-10s %7s %10s %10s %10s %10s %9s %9s\n", "type", "grid", "tokens", "fwd ms", "bwd ms",
              "total ms", "extra MiB", "GFLOP/s", "of sgemm");
  for (const auto& r : rows) {
    const std::string grid = cat(r.t, "x", r.h, "x", r.w);
    const double rate = r.flops / ((r.fwd_ms + r.bwd_ms) * 1e-3);
    std::printf("  %-9s %-10s %7lld %10.1f %10.1f %10.1f %10.2f %9.2f %9.3f\n", r.type.c_str(), grid.c_str(),
                static_cast<long long>(r.tokens), r.fwd_ms, r.bwd_ms, r.fwd_ms + r.bwd_ms,
                r.extra_bytes < 0 ? -1.0 : double(r.extra_bytes) / (1 << 20), rate / 1e9, rate / sgemm);
  }
  std::printf("  time(8N)/time(N) (64 = quadratic, 8 = linear; the rows of a type interleaved):\n");
  for (const auto& s : scaling)
    std::printf("    %-9s %6lld -> %6lld tokens: %6.1f\n", s["type"].get<std::string>().c_str(),
                static_cast<long long>(s["tokens"].get<int64_t>()),
                static_cast<long long>(8 * s["tokens"].get<int64_t>()), s["ratio_8x"].get<double>());
  for (const auto& note : notes) std::printf("  note: %s\n", note.c_str());
}

}  // namespace

void add_bench_attention(CLI::App& bench) {
  auto a = std::make_shared<BenchAttentionArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "attention", "Forward+backward time and peak extra memory of dense, window, dsa_fixed and dsa, 1k..64k tokens");
  cmd->add_option("--max-tokens", a->max_tokens, "Largest token grid to run")->capture_default_str();
  cmd->add_option("--dense-max-tokens", a->dense_max_tokens, "Skip dense attention above this many tokens")
      ->capture_default_str();
  cmd->add_option("--heads", a->heads, "Attention heads (and DSA offset groups)")->capture_default_str();
  cmd->add_option("--head-dim", a->head_dim, "Head dimension")->capture_default_str();
  cmd->add_option("--repeat", a->repeat,
                  "Rounds over one type's rows, each running every row for --budget / --repeat seconds (at least "
                  "once); a row's fastest run counts")
      ->capture_default_str();
  cmd->add_option("--budget", a->budget_s, "Seconds of runs per row, spread over the rounds")->capture_default_str();
  cmd->add_option("--types", a->types, "Attention types to run, in this order")
      ->check(CLI::IsMember(kTypes))
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "Print one JSON object");
  cmd->callback([a] { bench_attention(*a); });
}

}  // namespace ms::cli
