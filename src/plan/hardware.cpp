#include "plan/hardware.h"

#include <unistd.h>

#include <algorithm>

#include "core/check.h"
#include "core/memory_usage.h"
#include "core/text.h"
#include "runtime/arena.h"

namespace ms {
namespace {

// PCIe Gen5 x16: 32 GT/s x 16 lanes, 128b/130b = 63 GB/s per direction theoretical ("64 GB/s" in datasheets);
// pinned cudaMemcpyAsync measures ~53-56 GB/s per direction on H100/H200 hosts.
constexpr double kPcie5 = 55e9, kPcie5Peak = 64e9;
// Host DRAM: an 8-channel DDR5-4800 workstation (Xeon w9-3400 class, up to 4 TB: the paper's 1.5 TB box) has
// 307 GB/s theoretical; STREAM triad reaches ~75 % of it. Assumed, not measured: pass --host-mem-gbps.
constexpr double kHostMem = 230e9;
constexpr int64_t kPaperHost = 1'500'000'000'000;  // the paper's 1.5 TB of DDR5
// Between GPUs (docs/distributed.md): NVLink 4 on H100/H200 SXM is 900 GB/s per GPU, both directions together (18
// links x 50 GB/s), so 450 GB/s each way; H100 NVL pairs are bridged at 600 GB/s (300 each way). Between machines,
// one NDR InfiniBand NIC (400 Gb/s) per GPU, as in DGX/HGX H100 and H200 systems: 50 GB/s each way. Datasheet rates;
// NCCL's measured bus bandwidth is lower (about 80 %).
constexpr double kNvlink4 = 450e9, kNvlinkBridge = 300e9, kNdr = 50e9;

HardwareProfile gpu(const char* name, int64_t hbm, double hbm_rate, double flops, double peer, const char* source) {
  HardwareProfile p;
  p.hbm_bytes_per_s = hbm_rate;
  p.peer_bytes_per_s = peer;
  p.network_bytes_per_s = kNdr;
  p.name = name;
  p.device_bytes = hbm;
  p.flops_per_s = flops;
  p.link_bytes_per_s = kPcie5;
  p.link_peak_bytes_per_s = kPcie5Peak;
  p.host_mem_bytes_per_s = kHostMem;
  p.host_bytes = kPaperHost;
  p.reserve_bytes = kDeviceReserve;
  p.source = source;
  return p;
}

// The CPU backend: the "device" is host memory. The GEMM rate is nominal (a 16-core AVX-512 host reaches
// ~1 TFLOP/s in sgemm; `megaslide bench train` measures this machine's); RAM is this machine's.
HardwareProfile cpu() {
  HardwareProfile p;
  p.name = "cpu";
  p.device_bytes = int64_t(sysconf(_SC_PHYS_PAGES)) * int64_t(sysconf(_SC_PAGE_SIZE));
  p.host_bytes = std::min(p.device_bytes, host_limit().bytes);  // what this process can get (core/memory_usage.h)
  p.flops_per_s = 1e12;
  p.host_mem_bytes_per_s = p.hbm_bytes_per_s = 100e9;
  p.weight_bytes = p.act_bytes = 4;
  p.grad_slots = 0;
  p.peer_bytes_per_s = p.host_mem_bytes_per_s / 2;  // ranks of one machine exchange through its memory
  p.network_bytes_per_s = 12.5e9;                   // 100 Gb Ethernet
  p.source =
      "nominal: 1 TFLOP/s f32 sgemm, 100 GB/s DRAM; RAM from sysconf, host memory what this process can get (this "
      "machine)";
  return p;
}

}  // namespace

HardwareProfile hardware_profile(const std::string& name) {
  // NVIDIA datasheets: dense bf16 tensor-core rate (half the "with sparsity" figure), HBM capacity.
  if (name == "h200")
    return gpu("h200", 141'000'000'000, 4.8e12, 989e12, kNvlink4,
               "NVIDIA H200 SXM datasheet: 141 GB HBM3e at 4.8 TB/s, 989 TFLOP/s bf16 dense; PCIe Gen5 x16");
  if (name == "h100-sxm")
    return gpu("h100-sxm", 80'000'000'000, 3.35e12, 989e12, kNvlink4,
               "NVIDIA H100 SXM datasheet: 80 GB HBM3 at 3.35 TB/s, 989 TFLOP/s bf16 dense; PCIe Gen5 x16");
  if (name == "h100-nvl")
    return gpu("h100-nvl", 94'000'000'000, 3.9e12, 835e12, kNvlinkBridge,
               "NVIDIA H100 NVL datasheet: 94 GB HBM3 at 3.9 TB/s, 835 TFLOP/s bf16 dense; PCIe Gen5 x16");
  if (name == "cpu") return cpu();
  std::string all;
  for (const auto& n : hardware_names()) all += " " + n;
  MS_FAIL("unknown --gpu ", quote_text(name), "; profiles:", all,
          " (or override its numbers with --hbm, --tflops, --link-gbps)");
}

std::vector<std::string> hardware_names() { return {"h200", "h100-sxm", "h100-nvl", "cpu"}; }

}  // namespace ms
