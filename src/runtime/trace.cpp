#include "runtime/trace.h"

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"

namespace ms {

Trace::Trace() : origin_(std::chrono::steady_clock::now()) {}

int Trace::track(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  tracks_.push_back(name);
  return int(tracks_.size() - 1);
}

void Trace::add(int track, const std::string& name, std::chrono::steady_clock::time_point begin,
                std::chrono::steady_clock::time_point end) {
  using us = std::chrono::duration<double, std::micro>;
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.push_back({track, name, us(begin - origin_).count(), us(end - begin).count()});
}

size_t Trace::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return spans_.size();
}

void Trace::write(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json events = nlohmann::json::array();
  for (size_t i = 0; i < tracks_.size(); ++i)
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", 1}, {"tid", i}, {"args", {{"name", tracks_[i]}}}});
  for (const auto& s : spans_)
    events.push_back({{"ph", "X"}, {"name", s.name}, {"pid", 1}, {"tid", s.track}, {"ts", s.ts_us}, {"dur", s.dur_us}});
  write_file_atomic(path, nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n");
}

}  // namespace ms
