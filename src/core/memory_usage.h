// The process's memory (Linux): what benchmarks and --verbose report as peak memory, and how much more host memory
// this process can really get (docs/runtime.md: "Host memory"), which every verb that allocates model state checks
// its need against before it allocates.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ms {

int64_t resident_bytes();       // VmRSS; -1 when unreadable
int64_t peak_resident_bytes();  // VmHWM: the peak since start or the last reset; -1 when unreadable
bool reset_peak_resident();     // VmHWM := VmRSS (Linux >= 4.0); false where not allowed

// "Key:   123 kB" lines (/proc/meminfo, /proc/self/status): the value of `key` in bytes, or -1 when absent.
int64_t kib_field(std::string_view text, std::string_view key);

// One source that bounds the host memory this process may still allocate.
struct HostLimit {
  int64_t bytes = 0;   // what is left under it
  std::string source;  // for messages: what the limit is and where it comes from
};

// Where the limits are read; tests point these at fixture files.
struct ProcFiles {
  std::string meminfo = "/proc/meminfo";
  std::string cgroup = "/proc/self/cgroup";
  std::string mountinfo = "/proc/self/mountinfo";
  std::string status = "/proc/self/status";
};

// Every limit that applies, each with what is left under it: MemAvailable; the memory cgroup's limit (v2
// memory.max, v1 memory.limit_in_bytes, the smallest over the cgroup and its ancestors) less its usage that the
// kernel cannot reclaim (usage less inactive file pages); RLIMIT_AS less what the process has mapped (VmSize) and
// RLIMIT_DATA less its data segment (VmData). Unreadable or absent sources are left out.
std::vector<HostLimit> host_limits(const ProcFiles& files = {});

// --host-memory's text as bytes (core/units.h's byte sizes); throws ms::Error unless it is a positive size.
int64_t parse_host_memory(const std::string& text);

// The smallest of host_limits(), or `given` bytes (--host-memory) when positive.
HostLimit host_limit(int64_t given = 0, const ProcFiles& files = {});

// Throws ms::Error unless `need` bytes fit in `limit`: "<what> needs N of host memory (<detail>) but <source> leaves M.
// <fix>", and that --host-memory overrides a detected limit.
void require_host_memory(const std::string& what, int64_t need, const std::string& detail, const HostLimit& limit,
                         const std::string& fix);

}  // namespace ms
