// The process's memory from /proc/self/status (Linux): what benchmarks and --verbose report as peak memory.
#pragma once
#include <cstdint>

namespace ms {

int64_t resident_bytes();       // VmRSS; -1 when unreadable
int64_t peak_resident_bytes();  // VmHWM: the peak since start or the last reset; -1 when unreadable
bool reset_peak_resident();     // VmHWM := VmRSS (Linux >= 4.0); false where not allowed

}  // namespace ms
