#include "model/loader.h"

#include <filesystem>

#include "core/check.h"
#include "core/log.h"
#include "io/weight_files.h"
#include "model/init.h"

namespace fs = std::filesystem;

namespace ms {
namespace {

// The weights inside a model directory: ours (model.safetensors) first, then Wan's file names,
// then every safetensors file.
std::string weights_in_dir(const fs::path& dir) {
  for (const char* name :
       {"model.safetensors", "diffusion_pytorch_model.safetensors.index.json", "diffusion_pytorch_model.safetensors"})
    if (fs::exists(dir / name)) return (dir / name).string();
  return WeightFiles::has_weights(dir.string()) ? dir.string() : std::string();
}

std::string list_names(const std::vector<std::string>& names, size_t most = 5) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < most; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > most) s += cat(" and ", names.size() - most, " more");
  return s;
}

}  // namespace

ModelSource resolve_model(const std::string& model, const std::string& config) {
  ModelSource src;
  if (is_preset(model)) {
    src.config = config.empty() ? preset_config(model) : load_config(config);
    src.description = "preset " + model;
    return src;
  }
  const fs::path p(model);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    const fs::path cfg = config.empty() ? p / "config.json" : fs::path(config);
    if (!fs::exists(cfg)) MS_FAIL("model directory '", model, "' has no config.json; add one or pass --config");
    src.config = load_config(cfg.string());
    src.weights = weights_in_dir(p);
    src.description = model;
    return src;
  }
  if (fs::is_regular_file(p, ec)) {
    if (config.empty()) MS_FAIL("--model '", model, "' is a weights file: pass its config with --config config.json");
    src.config = load_config(config);
    src.weights = model;
    src.description = model;
    return src;
  }
  std::string presets;
  for (const auto& n : preset_names()) presets += " " + n;
  MS_FAIL("--model '", model, "' is neither a file, a directory nor a preset (presets:", presets, ")");
}

void load_params(const ModelSource& src, const ParamTable& table, uint64_t seed, float* params) {
  init_params(table, src.config.dim, seed, params);
  if (src.weights.empty()) {
    log_info("model ", src.description, ": no weights given, Wan initialisation with seed ", seed);
    return;
  }
  WeightFiles files = WeightFiles::open(src.weights);
  std::vector<std::string> missing, added;
  for (const auto& p : table.params()) {
    const SafetensorsEntry* e = files.find(p.name);
    if (!e) {
      (p.name.find(".self_attn.offset_") != std::string::npos ? added : missing).push_back(p.name);
      continue;
    }
    if (e->shape != p.shape)
      MS_FAIL(files.file_of(p.name), ": parameter '", p.name, "' has shape ", shape_str(e->shape), " but the config (",
              src.description, ") needs ", shape_str(p.shape), "; the checkpoint does not match its config");
    read_as_f32(*e, params + p.offset);
  }
  if (!missing.empty())
    MS_FAIL(src.weights, ": ", missing.size(), " parameters missing (", list_names(missing),
            "); the checkpoint does not match the config");
  if (!added.empty())
    log_info("model ", src.description, ": added ", added.size(),
             " DSA offset parameters absent from the checkpoint (offset_proj zero: starts as dsa_fixed): ",
             list_names(added, 4));
  std::vector<std::string> unused;
  for (const auto& n : files.names())
    if (!table.find(n)) unused.push_back(n);
  if (!unused.empty())
    log_warn(src.weights, ": ", unused.size(), " tensors not used by the model: ", list_names(unused));
}

}  // namespace ms
