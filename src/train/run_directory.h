// A training run's directory (--out): created if needed, cleared of the temporaries a killed run left, its
// summary.json written, and metrics.jsonl kept to the steps of the checkpoint the run starts from, then appended
// one line per step; TensorBoard's event file beside it. Checkpoints themselves: train/checkpoint.h.
#pragma once
#include <cstdint>
#include <fstream>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "io/tfevents.h"

namespace ms {

class RunDirectory {
 public:
  // Starts (or continues) the run in `out` at step `step`: drops metrics lines past it (left by a run that died
  // after its last checkpoint). Throws ms::Error when the directory cannot be made or written.
  RunDirectory(const std::string& out, int64_t step);

  void write_summary(const nlohmann::json& summary) const;
  // One line of metrics.jsonl, flushed, and its loss, lr, grad_norm and tokens_per_second as TensorBoard scalars
  // (train/...).
  void append_metrics(const nlohmann::json& line);
  // The samples' contact sheet of `step` (a PNG file of width x height pixels) as TensorBoard's image "samples".
  void add_sample_sheet(int64_t step, const std::string& png, int64_t width, int64_t height);

 private:
  std::string out_;
  std::ofstream metrics_;
  TfEventsWriter events_;
};

}  // namespace ms
