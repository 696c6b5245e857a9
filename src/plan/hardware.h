// Hardware profiles for `plan`: the device's memory and GEMM rate, the host link and the host memory bandwidth.
// Numbers are vendor datasheet values unless marked otherwise; every one can be overridden on the command line.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ms {

struct HardwareProfile {
  std::string name;
  int64_t device_bytes = 0;          // device memory (HBM); on the cpu profile, host RAM (the arena lives there)
  double flops_per_s = 0;            // dense GEMM rate at the compute dtype: bf16 on GPUs, f32 on the CPU
  double hbm_bytes_per_s = 0;        // device memory bandwidth (the memory-bound kernels); on the cpu profile, DRAM's
  double link_bytes_per_s = 0;       // host<->device, per direction, effective; 0: none (device memory is host memory)
  double link_peak_bytes_per_s = 0;  // the same, theoretical (reported only)
  double host_mem_bytes_per_s = 0;   // host DRAM bandwidth available to the optimizer and the DMA engines
  int64_t host_bytes = 0;            // default --host-memory
  int weight_bytes = 2;              // device weight dtype: bf16 on GPUs, f32 on the CPU backend
  int act_bytes = 2;                 // activation dtype: bf16 on GPUs, f32 on the CPU backend
  int grad_slots = 2;                // stage-sized fp32 gradient slots: one accumulating, one draining D2H; 0 on the
                                     // CPU backend, whose backward accumulates straight into the host grad pool
  int64_t reserve_bytes = 0;         // kept out of the default device budget (CUDA context, cuBLASLt workspace)
  double peer_bytes_per_s = 0;       // between the devices of one machine, per device and direction (NVLink)
  double network_bytes_per_s = 0;    // between machines, per device and direction (InfiniBand)
  std::string source;                // where the numbers come from
  bool unified() const { return link_bytes_per_s == 0; }
};

// h200 | h100-sxm | h100-nvl | cpu. Throws ms::Error naming the unknown profile and listing the known ones.
HardwareProfile hardware_profile(const std::string& name);
std::vector<std::string> hardware_names();

}  // namespace ms
