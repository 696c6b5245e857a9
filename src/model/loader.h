// Resolves `--model` (a preset name, a model directory with config.json and optional weights, or a
// safetensors file with `--config`) and fills a parameter pool from it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/weight_files.h"
#include "core/enum_names.h"
#include "model/config.h"
#include "model/param_table.h"

namespace ms {

// Wan2.2 A14B's two experts: the high-noise one denoises the timesteps t >= boundary * 1000, the low-noise one those
// below (Wan's text2video.py, diffusers' WanPipeline).
enum class Expert { none, high, low };
template <>
struct EnumNames<Expert> {
  static constexpr std::array<EnumName<Expert>, 3> values{
      {{Expert::none, "none"}, {Expert::high, "high"}, {Expert::low, "low"}}};
};

// Wan's T2V-A14B boundary (wan/configs/wan_t2v_A14B.py): Wan's folders do not record it.
constexpr double kWanT2vA14bBoundary = 0.875;
// The boundary in effect: `given` (--boundary) when positive, else `recorded` (ModelSource::boundary) when
// positive, else Wan's T2V-A14B.
inline double expert_boundary(double given, double recorded) {
  return given > 0 ? given : recorded > 0 ? recorded : kWanT2vA14bBoundary;
}

struct ModelSource {
  ModelConfig config;
  std::string description;  // for log lines: "preset tiny", "/path/model"
  std::string weights;      // file, index json or directory holding weights; empty = initialise
  // An expert of a two-expert folder: the boundary its folder records (diffusers' model_index.json boundary_ratio),
  // 0 where it records none (Wan's layout, a single file, a preset).
  double boundary = 0;
};

// model: preset name | directory (ours, Wan's, diffusers' transformer/ folder or the pipeline folder above it, or a
// Wan2.2 A14B folder holding two experts: Wan's high_noise_model/ and low_noise_model/, diffusers' transformer/
// (high noise) and transformer_2/ (low noise)) | weights file (.safetensors or .pth); config: a config.json in Wan's
// or diffusers' form, optional: without it a directory's config.json is read, or the config is inferred from the
// weights' shapes when they are a known Wan T2V model's (ComfyUI single files). expert picks one of a two-expert
// folder's models (none there is an error naming the choice). Throws ms::Error naming what is missing and what to
// pass.
ModelSource resolve_model(const std::string& model, const std::string& config, Expert expert = Expert::none);

// The two experts' folders of a Wan2.2 A14B model folder {high, low}, or empty strings when `dir` is not one.
std::array<std::string, 2> expert_folders(const std::string& dir);

// Opens weights (io/weight_files.h) with Wan's names: diffusers' names are mapped (model/name_map.h).
WeightFiles open_model_weights(const std::string& path);

// The config of the Wan2.1 T2V preset (1.3B, 14B) whose shapes the weights have; throws when they match none.
ModelConfig infer_config(const std::string& weights);

// Fills params [table.total()] (f32) with every parameter the weights hold (Wan or diffusers names; fp8 widened,
// ComfyUI scaled fp8 dequantised), the rest with Wan's initialisation from `seed`. A parameter with the wrong shape
// is an error; missing parameters are an error, except the DSA offset network (`self_attn.offset_*`), which keeps
// its initialisation (offset_proj zero: the layer starts as dsa_fixed) and is reported. Unused checkpoint tensors
// draw a warning. A model of 1 GB or more (f32) shows its progress (core/work_progress.h).
void load_params(const ModelSource& src, const ParamTable& table, uint64_t seed, float* params);

// A run of the flat parameter pool [begin, end) that a caller keeps, at dst [end - begin].
struct ParamSpan {
  int64_t begin = 0, end = 0;
  float* dst = nullptr;
};
// load_params for the spans alone (sorted, disjoint): a rank of a distributed run loads its shards holding at most
// one parameter beyond them (one that straddles a span's edge is read or initialised whole, then cut).
void load_params(const ModelSource& src, const ParamTable& table, uint64_t seed, const std::vector<ParamSpan>& spans);

}  // namespace ms
