#include "model/init.h"

#include <cmath>

#include "core/parallel.h"
#include "core/rng.h"

namespace ms {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

uint64_t name_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull ^ seed;  // FNV-1a over the name, keyed by the seed
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  return h;
}

void init_one(const ParamInfo& p, int64_t dim, int64_t patch_fan_in, uint64_t seed, float* out) {
  Rng rng(name_seed(seed, p.name));
  const auto& s = p.shape;
  auto fill = [&](auto&& draw) {
    for (int64_t i = 0; i < p.numel; ++i) out[i] = float(draw());
  };
  auto xavier = [&] {
    const int64_t fan_out = s[0], fan_in = p.numel / s[0];
    const double bound = std::sqrt(6.0 / double(fan_in + fan_out));
    fill([&] { return rng.uniform(-bound, bound); });
  };
  if (ends_with(p.name, "modulation")) {
    fill([&] { return rng.normal() / std::sqrt(double(dim)); });
  } else if (ends_with(p.name, "norm_q.weight") || ends_with(p.name, "norm_k.weight") ||
             ends_with(p.name, "norm3.weight")) {
    fill([] { return 1.0; });
  } else if (p.name == "head.head.weight" || ends_with(p.name, "self_attn.offset_proj.weight")) {
    fill([] { return 0.0; });
  } else if (ends_with(p.name, "self_attn.offset_conv.weight") || ends_with(p.name, "self_attn.offset_conv.bias")) {
    const double bound = 1.0 / std::sqrt(27.0);  // Conv3d's default for a depthwise 3x3x3 kernel: fan_in 27
    fill([&] { return rng.uniform(-bound, bound); });
  } else if (p.name == "patch_embedding.weight") {
    xavier();
  } else if (p.name == "patch_embedding.bias") {  // Conv3d's default bias init
    const double bound = 1.0 / std::sqrt(double(patch_fan_in));
    fill([&] { return rng.uniform(-bound, bound); });
  } else if (ends_with(p.name, ".weight") &&
             (starts_with(p.name, "text_embedding.") || starts_with(p.name, "time_embedding."))) {
    fill([&] { return 0.02 * rng.normal(); });
  } else if (ends_with(p.name, ".weight")) {
    xavier();
  } else {
    fill([] { return 0.0; });  // Linear biases, norm3.bias
  }
}

int64_t patch_fan_in(const ParamTable& table) {
  const ParamInfo* patch = table.find("patch_embedding.weight");
  return patch->numel / patch->shape[0];
}

}  // namespace

void init_param(const ParamTable& table, const ParamInfo& p, int64_t dim, uint64_t seed, float* out) {
  init_one(p, dim, patch_fan_in(table), seed, out);
}

void init_params(const ParamTable& table, int64_t dim, uint64_t seed, float* params,
                 const std::function<bool(const ParamInfo&)>& which, WorkProgress* progress) {
  const auto& ps = table.params();
  const int64_t fan_in = patch_fan_in(table);
  parallel_for(int64_t(ps.size()), [&](int64_t i) {
    const ParamInfo& p = ps[size_t(i)];
    if (which && !which(p)) return;
    init_one(p, dim, fan_in, seed, params + p.offset);
    if (progress) progress->advance(p.numel);
  });
}

}  // namespace ms
