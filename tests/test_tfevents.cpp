// TensorBoard's record framing: CRC-32C against its published check value and RFC 3720's test vectors. The event
// files themselves are read back by an independent reader (tools/check_tfevents.py, ctest
// TensorBoard.EventFilesDecodeAndMatchMetrics).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/tfevents.h"

namespace ms {
namespace {

TEST(TfEvents, Crc32cMatchesPublishedValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the CRC catalogue's check value for CRC-32C (iSCSI)
  const std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF);
  std::vector<uint8_t> up(32), down(32);
  for (int i = 0; i < 32; ++i) up[size_t(i)] = uint8_t(i), down[size_t(i)] = uint8_t(31 - i);
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);  // RFC 3720, B.4
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down.data(), 32), 0x113FDB5Cu);
  const uint32_t c = 0xE3069283u;  // TFRecord's mask: rotate right 15, add a constant (mod 2^32)
  EXPECT_EQ(masked_crc32c("123456789", 9), uint32_t(((c >> 15) | (c << 17)) + 0xa282ead8u));
}

}  // namespace
}  // namespace ms
