// libFuzzer target: the PyTorch zip checkpoint reader (zip directory, restricted unpickler, storage views) on
// arbitrary bytes. Every input must either open (and then every tensor converts to f32 without reading out of
// bounds) or throw ms::Error; sanitizers catch the rest.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/check.h"
#include "io/pth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/megaslide-fuzz-" + std::to_string(::getpid()) + ".pth";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    const ms::PthFile pth = ms::PthFile::open(path);
    for (const auto& e : pth.entries()) {
      if (e.nbytes > (int64_t(1) << 24)) continue;
      std::vector<float> out(size_t(ms::numel(e.shape)));
      ms::read_as_f32(e, out.data());
    }
  } catch (const ms::Error&) {
  }
  return 0;
}
