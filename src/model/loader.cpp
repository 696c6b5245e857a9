#include "model/loader.h"

#include <algorithm>
#include <filesystem>
#include <functional>

#include "core/check.h"
#include "core/log.h"
#include "core/parallel.h"
#include "core/text.h"
#include "io/json_field.h"
#include "io/weight_files.h"
#include "model/init.h"
#include "model/name_map.h"

namespace fs = std::filesystem;

namespace ms {
namespace {

// The weights inside a model directory: ours (model.safetensors) first, then Wan's and diffusers' file names,
// then every weight file.
std::string weights_in_dir(const fs::path& dir) {
  for (const char* name :
       {"model.safetensors", "diffusion_pytorch_model.safetensors.index.json", "diffusion_pytorch_model.safetensors"})
    if (fs::exists(dir / name)) return (dir / name).string();
  return WeightFiles::has_weights(dir.string()) ? dir.string() : std::string();
}

std::string list_names(const std::vector<std::string>& names, size_t most = 5) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < most; ++i) s += (i ? ", " : "") + quote_text(names[i]);
  if (names.size() > most) s += cat(" and ", names.size() - most, " more");
  return s;
}

}  // namespace

WeightFiles open_model_weights(const std::string& path) {
  WeightFiles files = WeightFiles::open(path);
  if (has_diffusers_names(files.names())) files.rename(diffusers_to_wan);
  return files;
}

ModelConfig infer_config(const std::string& weights) {
  const WeightFiles files = open_model_weights(weights);
  auto shape = [&](const std::string& name) {
    const TensorEntry* e = files.find(name);
    if (!e)
      MS_FAIL(weights, ": no config given and no '", name,
              "' to infer one from; this is not a Wan2.1 DiT checkpoint, "
              "or pass its config with --config config.json");
    return e->shape;
  };
  if (files.find("img_emb.proj.0.weight") || files.find("blocks.0.cross_attn.k_img.weight"))
    MS_FAIL(weights,
            ": an image-to-video Wan model (it has image-embedding weights); megaslide trains text-to-video "
            "models only");
  if (files.find("blocks.0.self_attn.offset_proj.weight"))
    MS_FAIL(weights,
            ": a DSA model (offset network weights), whose attention config the shapes do not tell; pass its "
            "config with --config config.json");
  const Shape patch = shape("patch_embedding.weight"), head = shape("head.head.weight"),
              ffn = shape("blocks.0.ffn.0.weight"), text = shape("text_embedding.0.weight"),
              time = shape("time_embedding.0.weight");
  int64_t layers = 0;
  while (files.find(cat("blocks.", layers, ".modulation"))) ++layers;
  int64_t volume = 1;
  if (patch.size() != 5 || head.size() != 2 || ffn.size() != 2 || text.size() != 2 || time.size() != 2 ||
      __builtin_mul_overflow(patch[2], patch[3], &volume) || __builtin_mul_overflow(volume, patch[4], &volume))
    MS_FAIL(weights, ": its tensors do not have the shapes of a Wan2.1 DiT; pass its config with --config config.json");
  const std::string seen =
      cat("dim ", patch[0], ", ffn_dim ", ffn[0], ", ", layers, " layers, in_dim ", patch[1], ", out_dim ",
          volume ? head[0] / volume : 0, ", text_dim ", text[1], ", freq_dim ", time[1]);
  // Wan2.2's T2V-A14B experts have Wan2.1-T2V-14B's shapes, and so its config.
  for (const char* preset : {"wan2.1-t2v-1.3b", "wan2.1-t2v-14b", "wan2.2-ti2v-5b"}) {
    const ModelConfig c = preset_config(preset);
    if (c.dim == patch[0] && c.in_dim == patch[1] && c.patch_size == std::array{patch[2], patch[3], patch[4]} &&
        c.out_dim * c.patch_volume() == head[0] && c.ffn_dim == ffn[0] && c.num_layers == layers &&
        c.text_dim == text[1] && c.freq_dim == time[1]) {
      log_info(weights, ": no config given; the shapes (", seen, ") are ", preset, "'s",
               c.dim == 5120 ? " (and a Wan2.2 A14B expert's)" : "");
      return c;
    }
  }
  MS_FAIL(weights, ": no config given, and the shapes (", seen,
          ") match no known Wan text-to-video config "
          "(Wan2.1 1.3B: dim 1536, 30 layers; Wan2.1 14B and Wan2.2 A14B: dim 5120, 40 layers; Wan2.2 TI2V-5B: dim "
          "3072, 30 layers, in_dim 48); pass its config with --config config.json");
}

std::array<std::string, 2> expert_folders(const std::string& dir) {
  const fs::path p(dir);
  for (const auto& [high, low] : {std::pair{"high_noise_model", "low_noise_model"}, {"transformer", "transformer_2"}})
    if (fs::is_directory(p / high) && fs::is_directory(p / low)) return {(p / high).string(), (p / low).string()};
  return {};
}

ModelSource resolve_model(const std::string& model, const std::string& config, Expert expert) {
  const std::array<std::string, 2> experts = expert_folders(model);
  if (!experts[0].empty()) {
    const std::string layout = cat(fs::path(experts[0]).filename().string(), "/ and ",
                                   fs::path(experts[1]).filename().string(), "/");
    if (expert == Expert::none)
      MS_FAIL("'", model, "' holds Wan2.2's two experts (", layout,
              "); train one with --expert high (the timesteps at or above the boundary) or --expert low (those "
              "below); the other verbs take one expert's folder, such as ", experts[0]);
    ModelSource src = resolve_model(experts[expert == Expert::high ? 0 : 1], config);
    const fs::path index = fs::path(model) / "model_index.json";
    if (fs::exists(index)) {
      const nlohmann::json j = read_json_file(index.string(), "diffusers pipeline index", "");
      if (j.contains("boundary_ratio") && !j["boundary_ratio"].is_null()) {
        src.boundary = json_field(j, "boundary_ratio", index.string(), 0.0);
        if (!(src.boundary > 0 && src.boundary < 1))
          MS_FAIL(index.string(), ": boundary_ratio ", src.boundary, " must lie strictly between 0 and 1");
      }
    }
    log_info(model, ": Wan2.2's ", name_of(expert), "-noise expert (", src.description, ")");
    return src;
  }
  ModelSource src;
  if (is_preset(model)) {
    src.config = config.empty() ? preset_config(model) : load_config(config);
    src.description = "preset " + model;
    return src;
  }
  const fs::path p(model);
  std::error_code ec;
  src.description = model;
  if (fs::is_directory(p, ec)) {
    // A model directory (ours, Wan's, or diffusers' transformer/ folder), or a diffusers pipeline folder above one.
    const fs::path dir =
        !fs::exists(p / "config.json") && fs::exists(p / "transformer" / "config.json") ? p / "transformer" : p;
    src.weights = weights_in_dir(dir);
    if (!config.empty() || fs::exists(dir / "config.json"))
      src.config = load_config(config.empty() ? (dir / "config.json").string() : config);
    else if (!src.weights.empty())
      src.config = infer_config(src.weights);
    else
      MS_FAIL("model directory '", model, "' has no config.json and no weights; add them or pass --config");
    return src;
  }
  if (fs::is_regular_file(p, ec)) {
    src.weights = model;
    src.config = config.empty() ? infer_config(model) : load_config(config);
    return src;
  }
  std::string presets;
  for (const auto& n : preset_names()) presets += " " + n;
  MS_FAIL("--model '", model, "' is neither a file, a directory nor a preset (presets:", presets, ")");
}

void load_params(const ModelSource& src, const ParamTable& table, uint64_t seed, float* params) {
  load_params(src, table, seed, {{0, table.total(), params}});
}

void load_params(const ModelSource& src, const ParamTable& table, uint64_t seed, const std::vector<ParamSpan>& spans) {
  const int64_t dim = src.config.dim;
  int64_t kept = 0;
  for (const ParamSpan& s : spans) kept += s.end - s.begin;
  // Each parameter that overlaps a span: filled in place when one span holds it whole, else whole in a buffer and cut.
  struct Piece {
    const ParamInfo* p;
    float* whole;  // the parameter in place, or null: it straddles a span's edge
  };
  std::vector<Piece> pieces;
  for (const auto& p : table.params())
    for (const ParamSpan& s : spans)
      if (p.offset < s.end && p.offset + p.numel > s.begin) {
        const bool inside = p.offset >= s.begin && p.offset + p.numel <= s.end;
        pieces.push_back({&p, inside ? s.dst + (p.offset - s.begin) : nullptr});
        break;
      }
  std::vector<float> buffer;  // one straddling parameter at a time
  // Makes the piece's parameter and keeps what the spans hold of it; returns that count.
  auto fill = [&](const Piece& piece, const std::function<void(const ParamInfo&, float*)>& make) {
    const ParamInfo& p = *piece.p;
    if (piece.whole) {
      make(p, piece.whole);
      return p.numel;
    }
    buffer.resize(size_t(p.numel));
    make(p, buffer.data());
    int64_t n = 0;
    for (const ParamSpan& s : spans) {
      const int64_t lo = std::max(s.begin, p.offset), hi = std::min(s.end, p.offset + p.numel);
      if (lo >= hi) continue;
      std::copy(buffer.data() + (lo - p.offset), buffer.data() + (hi - p.offset), s.dst + (lo - s.begin));
      n += hi - lo;
    }
    return n;
  };
  auto init = [&](const ParamInfo& p, float* out) { init_param(table, p, dim, seed, out); };
  if (src.weights.empty()) {
    log_info("model ", src.description, ": no weights given, Wan initialisation with seed ", seed);
    WorkProgress progress("initialising " + src.description, kept, sizeof(float));
    parallel_for(int64_t(pieces.size()), [&](int64_t i) {  // those in place; each draws from its own stream
      const Piece& piece = pieces[size_t(i)];
      if (piece.whole) progress.advance(fill(piece, init));
    });
    for (const Piece& piece : pieces)
      if (!piece.whole) progress.advance(fill(piece, init));
    return;
  }
  const WeightFiles files = open_model_weights(src.weights);
  std::vector<std::string> missing, added;
  for (const auto& p : table.params()) {
    const TensorEntry* e = files.find(p.name);
    if (!e) {
      (is_offset_param(p.name) ? added : missing).push_back(p.name);
      continue;
    }
    if (e->shape != p.shape)
      MS_FAIL(files.file_of(p.name), ": parameter '", p.name, "' has shape ", shape_str(e->shape), " but the config (",
              src.description, ") needs ", shape_str(p.shape), "; the checkpoint does not match its config");
  }
  if (!missing.empty())
    MS_FAIL(src.weights, ": ", missing.size(), " parameters missing (", list_names(missing),
            "); the checkpoint does not match the config");
  {
    WorkProgress progress("loading " + fs::path(src.weights).filename().string(), kept, sizeof(float));
    // What the checkpoint lacks keeps Wan's initialisation.
    for (const Piece& piece : pieces)
      progress.advance(fill(piece, [&](const ParamInfo& p, float* out) {
        if (files.find(p.name))
          files.read_f32(p.name, out);
        else
          init(p, out);
      }));
  }
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
