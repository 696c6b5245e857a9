// Wan2.1's initialisation (WanModel.init_weights) for a model trained from scratch.
#pragma once
#include <cstdint>
#include <functional>

#include "core/work_progress.h"
#include "model/param_table.h"

namespace ms {

// Fills params [table.total()] (f32): Linear weights Xavier-uniform and biases zero; patch_embedding
// weight Xavier-uniform over its flattened [dim, in_dim*pt*ph*pw] view, bias U(+-1/sqrt(fan_in)) (Conv3d's
// default); text/time embedding weights N(0, 0.02); head.head.weight zero; modulation N(0, 1)/sqrt(dim);
// RMSNorm/LayerNorm weights one, biases zero. DSA's offset network: offset_conv weight and bias U(+-1/sqrt(27))
// (Conv3d's default, depthwise 3x3x3), offset_proj zero, so that a fresh DSA layer is exactly dsa_fixed. Each parameter
// draws from its own stream seeded by (seed, name), so the result does not depend on the order of parameters or on
// threads. `which`, when given, picks the parameters to initialise (the others are left as they are); `progress`
// advances by each one's numel.
void init_params(const ParamTable& table, int64_t dim, uint64_t seed, float* params,
                 const std::function<bool(const ParamInfo&)>& which = {}, WorkProgress* progress = nullptr);
// One parameter p of the table, as init_params fills it, into out [p.numel].
void init_param(const ParamTable& table, const ParamInfo& p, int64_t dim, uint64_t seed, float* out);

}  // namespace ms
