#include "model/param_table.h"

#include <algorithm>

#include "model/weights.h"

namespace ms {

bool is_offset_param(const std::string& name) { return name.find(".self_attn.offset_") != std::string::npos; }

ParamTable::ParamTable(const ModelConfig& c) {
  auto begin_stage = [&](std::string name, StageKind kind, int64_t block) {
    stages_.push_back({std::move(name), kind, block, total_, 0});
  };
  auto add = [&](const std::string& name, const Shape& s, auto&) {
    index_[name] = params_.size();
    params_.push_back({name, s, total_, numel(s), int(stages_.size() - 1)});
    total_ += numel(s);
    stages_.back().numel += numel(s);
  };
  begin_stage("stem", StageKind::stem, -1);
  StemW<int> stem{};
  visit_stem(c, stem, add);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    begin_stage("blocks." + std::to_string(i), StageKind::block, i);
    BlockW<int> block{};
    visit_block(c, i, block, add);
  }
  begin_stage("head", StageKind::head, -1);
  HeadW<int> head{};
  visit_head(c, head, add);
}

const ParamInfo* ParamTable::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &params_[it->second];
}

int64_t ParamTable::max_stage_numel() const {
  int64_t m = 0;
  for (const auto& s : stages_) m = std::max(m, s.numel);
  return m;
}

}  // namespace ms
