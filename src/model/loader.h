// Resolves `--model` (a preset name, a model directory with config.json and optional weights, or a
// safetensors file with `--config`) and fills a parameter pool from it.
#pragma once
#include <cstdint>
#include <string>

#include "model/config.h"
#include "model/param_table.h"

namespace ms {

struct ModelSource {
  ModelConfig config;
  std::string description;  // for log lines: "preset tiny", "/path/model"
  std::string weights;      // file, index json or directory holding weights; empty = initialise
};

// model: preset name | directory | .safetensors file; config: config.json path (required with a
// file, optional override otherwise). Throws ms::Error naming what is missing and what to pass.
ModelSource resolve_model(const std::string& model, const std::string& config);

// Fills params [table.total()] (f32): Wan initialisation from `seed`, then every parameter the
// weights hold. A parameter with the wrong shape is an error; missing parameters are an error,
// except the DSA offset network (`self_attn.offset_*`), which keeps its initialisation (offset_proj
// zero: the layer starts as dsa_fixed) and is reported. Unused checkpoint tensors draw a warning.
void load_params(const ModelSource& src, const ParamTable& table, uint64_t seed, float* params);

}  // namespace ms
