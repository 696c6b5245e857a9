#include "plan/kernel_rates.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/text.h"
#include "core/units.h"

namespace ms {
namespace {

// DSA's kernel (backend/cuda/dsa.cu) as reviewed in issue 53, before any GPU ran it: 50-90 ms forward and 270-470 ms
// backward per Wan2.1-14B layer at 75,600 tokens (40 heads of 128, window 3x3x3), which is 1.0e12 FLOPs in plan's
// count (forward 3.3e11, backward twice that): about 2.3 TFLOP/s on a 989 TFLOP/s H100 or H200.
constexpr double kDsaReviewed = 2.3e12, kReviewedPeak = 989e12;

}  // namespace

KernelRates default_kernel_rates(const HardwareProfile& hw) {
  KernelRates r;
  if (hw.unified()) {  // the CPU backend: one nominal rate for every family
    r.gemm = r.attention = r.dsa = {hw.flops_per_s, "the profile's nominal rate"};
    r.memory = {hw.host_mem_bytes_per_s, "the profile's DRAM rate"};
    return r;
  }
  const double peak = hw.flops_per_s;
  r.gemm = {0.7 * peak, "assumed: 70 % of the bf16 peak, as cuBLASLt's large GEMMs reach on Hopper"};
  r.attention = {
      0.25 * peak,
      "assumed: 25 % of the bf16 peak, the own flash kernels (FlashAttention-2's structure, untuned, not yet "
      "run on a GPU)"};
  r.dsa = {kDsaReviewed * peak / kReviewedPeak,
           "estimated from the review of the staged dsa.cu kernels in issue 53 (50-90 ms forward, 270-470 ms backward "
           "per Wan2.1-14B layer at 75,600 tokens; both now on tensor cores, unmeasured)"};
  r.memory = {0.8 * hw.hbm_bytes_per_s, "assumed: 80 % of the datasheet HBM bandwidth"};
  return r;
}

KernelRates read_kernel_rates(const std::string& path, const KernelRates& defaults) {
  std::ifstream in(path);
  if (!in) MS_FAIL("plan --rates: cannot read ", quote_text(path));
  std::string device = "a GPU", line;
  double gemm_flops = 0, gemm_s = 0, square = 0, copy = 0;
  struct Best {
    int64_t tokens = -1;
    double flops_per_s = 0;
  } dense, dsa;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object())
      MS_FAIL("plan --rates ", quote_text(path), ": line ", n,
              " is not a JSON object (bench cuda --json writes one a line)");
    const std::string measure = j.value("measure", "");
    try {
      if (measure == "device") device = j.value("device", device);
      if (measure == "gemm" && j.at("shape").get<std::string>().rfind("fp32", 0) != 0) {
        const double flops = 2.0 * j.at("M").get<double>() * j.at("N").get<double>() * j.at("K").get<double>(),
                     rate = j.at("tflops").get<double>() * 1e12;
        if (!(rate > 0)) MS_FAIL("a GEMM rate of ", rate);
        if (j.at("shape").get<std::string>().rfind("square", 0) == 0) {
          square = rate;
        } else {
          gemm_flops += flops;
          gemm_s += flops / rate;
        }
      }
      if (measure == "attention") {
        Best* b = j.at("type") == "dense" ? &dense : j.at("type") == "dsa" ? &dsa : nullptr;
        if (b && j.at("tokens").get<int64_t>() > b->tokens)
          *b = {j.at("tokens").get<int64_t>(), j.at("step_tflops").get<double>() * 1e12};
      }
      if (measure == "copy" && j.at("what") == "device_copy_gbps") copy = j.at("gbps").get<double>() * 1e9;
    } catch (const nlohmann::json::exception& e) {
      MS_FAIL("plan --rates ", quote_text(path), ": line ", n, " (", measure, "): ", e.what());
    }
  }
  KernelRates r = defaults;
  const std::string from = cat("measured: ", path, " (bench cuda on ", device, ")");
  if (gemm_s > 0)
    r.gemm = {gemm_flops / gemm_s, from + ", the model's GEMM shapes"};
  else if (square > 0)
    r.gemm = {square, from + ", the square GEMM"};
  if (dense.tokens > 0) r.attention = {dense.flops_per_s, cat(from, ", dense at ", dense.tokens, " tokens")};
  if (dsa.tokens > 0) r.dsa = {dsa.flops_per_s, cat(from, ", dsa at ", dsa.tokens, " tokens")};
  if (copy > 0) r.memory = {copy, from + ", the device-to-device copy"};
  if (gemm_s == 0 && square == 0 && dense.tokens < 0 && dsa.tokens < 0 && copy == 0)
    MS_FAIL("plan --rates ", quote_text(path), ": no GEMM, attention or copy measurement in it (bench cuda --json)");
  return r;
}

std::string describe(const KernelRates& r) {
  auto flops = [](const KernelRate& k) {
    char v[32];
    std::snprintf(v, sizeof v, "%.3g", k.per_s / 1e12);
    return cat(v, " TFLOP/s (", k.source, ")");
  };
  return cat("GEMM ", flops(r.gemm), ", attention ", flops(r.attention), ", DSA ", flops(r.dsa), ", memory-bound ",
             format_bytes(r.memory.per_s), "/s (", r.memory.source, ")");
}

}  // namespace ms
