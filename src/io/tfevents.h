// TensorBoard's event files (`events.out.tfevents.<seconds>.<host>.<pid>`), written so that `tensorboard --logdir`
// shows a run live: TFRecord framing (the length as 8 bytes little-endian, its masked CRC32C, the record, the
// record's masked CRC32C) around Event protobufs. The few fields a trainer writes are encoded here by hand from
// their numbers in TensorBoard's event.proto and summary.proto (docs/training.md), not through libprotobuf.
#pragma once
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace ms {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), and TFRecord's mask of it: rotated right by 15 bits
// plus 0xa282ead8.
uint32_t crc32c(const void* data, size_t n);
uint32_t masked_crc32c(const void* data, size_t n);

class TfEventsWriter {
 public:
  // Creates the event file in `dir` and writes its first event (file_version "brain.Event:2"). A run continued
  // from a checkpoint of step resumed_at > 0 also writes a SessionLog START at that step: TensorBoard then drops
  // the points past it that an earlier process wrote before it died. Throws ms::Error when the file cannot be made.
  TfEventsWriter(const std::string& dir, int64_t resumed_at);

  // One Summary event at `step` holding a simple_value per (tag, value).
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  // One Summary event at `step` holding an RGB image: `png` is the encoded file's bytes.
  void image(int64_t step, const std::string& tag, const std::string& png, int64_t width, int64_t height);

  const std::string& path() const { return path_; }

 private:
  // Frames and flushes one Event: wall_time, step, then `what` (already-encoded fields). A failed write is
  // warned about once and ends the file; training goes on.
  void write_event(int64_t step, const std::string& what);

  std::string path_;
  std::ofstream out_;
  bool failed_ = false;
};

}  // namespace ms
