#include "core/memory_usage.h"

#include <fstream>
#include <string>

namespace ms {
namespace {

int64_t proc_status_bytes(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string k;
  int64_t kb;
  while (f >> k) {
    if (k == key && f >> kb) return kb * 1024;
    f.ignore(1 << 20, '\n');
  }
  return -1;
}

}  // namespace

int64_t resident_bytes() { return proc_status_bytes("VmRSS:"); }
int64_t peak_resident_bytes() { return proc_status_bytes("VmHWM:"); }

bool reset_peak_resident() {
  std::ofstream f("/proc/self/clear_refs");
  return bool(f << "5");
}

}  // namespace ms
