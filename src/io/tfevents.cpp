#include "io/tfevents.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/check.h"
#include "core/log.h"

namespace ms {
namespace {

// A byte table for CRC-32C, built once (Sarwate's method: one lookup per byte).
const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Protobuf wire format: wire type 0 (varint), 1 (64-bit), 2 (length-delimited), 5 (32-bit). A scalar field at its
// default (zero bits) is left out, as proto3's own encoders leave it.
void put_varint(std::string& s, uint64_t v) {
  for (; v >= 0x80; v >>= 7) s.push_back(char(v | 0x80));
  s.push_back(char(v));
}
void put_key(std::string& s, int field, int wire) { put_varint(s, uint64_t(field) << 3 | uint64_t(wire)); }
void put_bytes(std::string& s, int field, const std::string& bytes) {
  put_key(s, field, 2);
  put_varint(s, bytes.size());
  s += bytes;
}
void put_int(std::string& s, int field, int64_t v) {
  if (v == 0) return;
  put_key(s, field, 0);
  put_varint(s, uint64_t(v));
}
template <class T>
void put_fixed(std::string& s, int field, T v) {  // double (wire type 1) or float (5), little-endian
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  if (std::all_of(b, b + sizeof(T), [](char c) { return c == 0; })) return;
  put_key(s, field, sizeof(T) == 8 ? 1 : 5);
  s.append(b, sizeof(T));
}
void put_le(std::string& s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(char(v >> (8 * i)));
}

// Field numbers: Event (event.proto), Summary, Summary.Value, Summary.Image (summary.proto), SessionLog.
enum : int { kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5, kSessionLog = 7 };
enum : int { kSummaryValue = 1, kValueTag = 1, kValueSimple = 2, kValueImage = 4 };
enum : int { kImageHeight = 1, kImageWidth = 2, kImageColorspace = 3, kImageEncoded = 4 };
enum : int { kSessionStatus = 1, kSessionStart = 1, kColorspaceRgb = 3 };

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || !host[0]) return "localhost";
  return host;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto& t = crc_table();
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = t[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

TfEventsWriter::TfEventsWriter(const std::string& dir, int64_t resumed_at) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  path_ = (std::filesystem::path(dir) / cat("events.out.tfevents.",
                                            std::chrono::duration_cast<std::chrono::seconds>(now).count(), ".",
                                            host_name(), ".", getpid()))
              .string();
  out_.open(path_, std::ios::binary | std::ios::app);
  if (!out_) MS_FAIL("cannot create TensorBoard's event file '", path_, "'; check that the run directory is writable");
  std::string what;
  put_bytes(what, kFileVersion, "brain.Event:2");
  write_event(0, what);
  if (resumed_at > 0) {
    std::string start;
    put_int(start, kSessionStatus, kSessionStart);
    what.clear();
    put_bytes(what, kSessionLog, start);
    write_event(resumed_at, what);
  }
}

void TfEventsWriter::scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  std::string summary;
  for (const auto& [tag, v] : values) {
    std::string value;
    put_bytes(value, kValueTag, tag);
    put_fixed(value, kValueSimple, float(v));
    put_bytes(summary, kSummaryValue, value);
  }
  std::string what;
  put_bytes(what, kSummary, summary);
  write_event(step, what);
}

void TfEventsWriter::image(int64_t step, const std::string& tag, const std::string& png, int64_t width,
                           int64_t height) {
  std::string img;
  put_int(img, kImageHeight, height);
  put_int(img, kImageWidth, width);
  put_int(img, kImageColorspace, kColorspaceRgb);
  put_bytes(img, kImageEncoded, png);
  std::string value;
  put_bytes(value, kValueTag, tag);
  put_bytes(value, kValueImage, img);
  std::string summary, what;
  put_bytes(summary, kSummaryValue, value);
  put_bytes(what, kSummary, summary);
  write_event(step, what);
}

void TfEventsWriter::write_event(int64_t step, const std::string& what) {
  if (failed_) return;
  std::string event;
  put_fixed(event, kWallTime,
            std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  put_int(event, kStep, step);
  event += what;
  std::string record;
  put_le(record, event.size(), 8);
  put_le(record, masked_crc32c(record.data(), 8), 4);
  record += event;
  put_le(record, masked_crc32c(event.data(), event.size()), 4);
  out_.write(record.data(), std::streamsize(record.size()));
  out_.flush();
  if (!out_) {
    failed_ = true;
    log_warn("cannot write TensorBoard's event file '", path_, "' (disk full?); the run goes on without it, ",
             "metrics.jsonl holds every step");
  }
}

}  // namespace ms
