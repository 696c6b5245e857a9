// VBench-style dynamic degree: does the video move enough to count as dynamic?
#pragma once
#include <cstdint>

#include "eval/optical_flow.h"

namespace ms {

struct DynamicDegree {
  double score = 0;      // mean over frame pairs of the pair score (pixels per frame)
  double threshold = 0;  // 6 * min(height, width) / 256: VBench's 6 pixels at 256, scaled with resolution
  int64_t moving_pairs = 0, needed_pairs = 0;
  bool dynamic = false;  // moving_pairs >= needed_pairs
};

// Pair score: the mean of the top 5 % flow magnitudes |(u, v)| of the forward flow (at least one
// pixel). A pair moves when its score exceeds the threshold; the video is dynamic when at least
// max(1, round(4 frames / 16)) pairs move (VBench's count for its 16-frame clips). VBench uses RAFT
// flow and skips the first pair; this uses DIS flow and every pair.
class DynamicDegreeCounter {
 public:
  // The forward flow of one pair of consecutive frames.
  void add_pair(const FlowField& forward);
  DynamicDegree result() const;  // needs a pair

 private:
  double sum_scores_ = 0, threshold_ = 0;
  int64_t pairs_ = 0, moving_pairs_ = 0;
};

}  // namespace ms
