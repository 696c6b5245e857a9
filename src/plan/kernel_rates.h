// The rates `plan` predicts a step's compute time with, per kernel family, instead of the datasheet's peak: what the
// kernels that run each part of a step reach. Defaults per hardware profile, each with its source (assumed fractions
// of the datasheet rates until a GPU has measured them); `plan --rates FILE` replaces them with the measurements of
// `megaslide bench cuda --json` (docs/analysis.md).
#pragma once
#include <string>

#include "plan/hardware.h"

namespace ms {

struct KernelRate {
  double per_s = 0;    // FLOP/s, or bytes/s for the memory-bound passes
  std::string source;  // "assumed: ..." or "measured: FILE ..."
};

struct KernelRates {
  KernelRate gemm;       // the linear layers (cuBLASLt, bf16)
  KernelRate attention;  // dense, window and cross attention (the own flash kernels)
  KernelRate dsa;        // dsa and dsa_fixed sampling attention, and the offset network's depthwise conv
  KernelRate memory;     // the memory-bound passes (norms, modulation, RoPE, activations, residuals): bytes/s
};

// The defaults for a profile, scaled with its (possibly overridden) peak rates.
KernelRates default_kernel_rates(const HardwareProfile& hw);

// `defaults` with every family that `path` (the JSON lines of `bench cuda --json`) measured replaced: GEMM from the
// bf16 GEMM lines (the model's shapes where present), attention from the dense row and DSA from the dsa row with the
// most tokens (their forward + backward rate), the memory-bound passes from the device-to-device copy. Throws
// ms::Error naming the file and line for an unreadable file, a line that is not a JSON object, or a file with none of
// these measurements.
KernelRates read_kernel_rates(const std::string& path, const KernelRates& defaults);

// "GEMM 692 TFLOP/s (measured: ...), attention ... , DSA ..., memory-bound 2.7 TB/s (...)": what `plan` prints after
// "kernel rates".
std::string describe(const KernelRates& r);

}  // namespace ms
