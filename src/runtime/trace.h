// Chrome trace events (complete events, ph "X"), one named thread per stream or worker, written as
// JSON that Perfetto and chrome://tracing load.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace ms {

class Trace {
 public:
  Trace();
  // Registers a track (a named thread in the viewer); returns its id.
  int track(const std::string& name);
  // Records [begin, end) on a track.
  void add(int track, const std::string& name, std::chrono::steady_clock::time_point begin,
           std::chrono::steady_clock::time_point end);
  // Writes the JSON file atomically.
  void write(const std::string& path) const;
  size_t size() const;

 private:
  struct Span {
    int track;
    std::string name;
    double ts_us, dur_us;
  };
  std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mutex_;
  std::vector<std::string> tracks_;
  std::vector<Span> spans_;
};

}  // namespace ms
