// libFuzzer target: the strict safetensors reader on arbitrary bytes. Every input must either open
// (and then every entry converts to f32 without reading out of bounds) or throw ms::Error.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/check.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/megaslide-fuzz-" + std::to_string(::getpid()) + ".safetensors";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    ms::SafetensorsFile st = ms::SafetensorsFile::open(path);
    for (const auto& e : st.entries()) {
      if (e.nbytes > (int64_t(1) << 24)) continue;
      std::vector<float> out(size_t(ms::numel(e.shape)));
      ms::read_as_f32(e, out.data());
    }
  } catch (const ms::Error&) {
  }
  return 0;
}
