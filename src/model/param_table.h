// The parameter size table: every parameter's name, shape and offset in the flat pools, grouped in
// stages (stem, block 0 .. block L-1, head) that are contiguous, so a stage is one span of every pool.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"

namespace ms {

enum class StageKind { stem, block, head };

// Whether name is a parameter of DSA's offset network (blocks.N.self_attn.offset_conv / offset_proj), which a
// checkpoint of a dense model lacks.
bool is_offset_param(const std::string& name);

struct ParamInfo {
  std::string name;  // Wan checkpoint key
  Shape shape;
  int64_t offset = 0;  // elements from the start of the pool
  int64_t numel = 0;
  int stage = 0;
};

struct StageInfo {
  std::string name;  // "stem", "blocks.N", "head"
  StageKind kind;
  int64_t block = -1;  // block index for blocks
  int64_t offset = 0, numel = 0;
};

class ParamTable {
 public:
  explicit ParamTable(const ModelConfig& c);

  const std::vector<ParamInfo>& params() const { return params_; }
  const std::vector<StageInfo>& stages() const { return stages_; }
  int64_t total() const { return total_; }
  const ParamInfo* find(const std::string& name) const;
  int64_t max_stage_numel() const;

 private:
  std::vector<ParamInfo> params_;
  std::vector<StageInfo> stages_;
  std::unordered_map<std::string, size_t> index_;
  int64_t total_ = 0;
};

}  // namespace ms
