// `megaslide convert IN OUT --to wan|diffusers|megaslide`: a DiT's weights from any form megaslide reads (our
// checkpoints, Wan's and diffusers' folders, ComfyUI single files, fp8, .pth) into the layout another tool reads;
// a Wan2.2 A14B folder's two experts into Wan's or diffusers' two-expert layout.
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/check.h"
#include "core/log.h"
#include "core/text.h"
#include "core/units.h"
#include "io/atomic_file.h"
#include "io/weight_files.h"
#include "model/export.h"
#include "model/loader.h"
#include "model/param_table.h"

namespace ms::cli {
namespace {

namespace fs = std::filesystem;

struct ConvertArgs {
  std::string in, out, to, dtype, config, shard_size = "5GB";
};

// What --dtype asks for: each tensor's own type (fp8 widened to bf16), or one for all.
struct DTypeChoice {
  bool force = false;
  DType to = DType::bf16;
};

// Writes src's DiT into dir (which exists) in `format`: each parameter as stored (bytes copied unchanged from the
// mapped file, so round trips are exact), or converted through f32 when --dtype asks for another type or the stored
// one is fp8 (scaled or not): those are written as bf16, each converted as it is written, so memory holds one tensor
// rather than the model. Returns the tensors written.
size_t convert_into(const ModelSource& src, const std::string& dir, SaveFormat format, DTypeChoice dtype,
                    int64_t shard_bytes) {
  if (src.weights.empty()) MS_FAIL("'", src.description, "' holds no weights to convert");
  const WeightFiles files = open_model_weights(src.weights);
  const ParamTable table(src.config);
  std::vector<TensorRef> tensors;  // a converted tensor's data pointer is null: its bytes are made as it is written
  int64_t widened = 0, skipped = 0;
  for (const ParamInfo& p : table.params()) {
    const TensorEntry* e = files.find(p.name);
    if (!e) {
      if (is_offset_param(p.name)) {  // a DSA config over dense weights
        ++skipped;
        continue;
      }
      MS_FAIL(src.weights, ": parameter '", p.name, "' is missing; the weights do not match the config");
    }
    if (e->shape != p.shape)
      MS_FAIL(files.file_of(p.name), ": parameter '", p.name, "' has shape ", shape_str(e->shape), " but the config ",
              "needs ", shape_str(p.shape), "; the weights do not match the config");
    const bool quantised = e->dtype == DType::f8_e4m3 || e->dtype == DType::f8_e5m2 || files.scaled(p.name);
    const DType to = dtype.force ? dtype.to : quantised ? DType::bf16 : e->dtype;
    const bool copied = to == e->dtype && !files.scaled(p.name);
    tensors.push_back({p.name, to, p.shape, copied ? e->data : nullptr});
    widened += !copied && quantised && !dtype.force;
  }
  std::vector<float> f32;  // the tensor being converted [numel]
  const TensorBytes bytes = [&](size_t i, std::vector<uint8_t>& scratch) -> const void* {
    const TensorRef& t = tensors[i];
    if (t.data) return t.data;
    const int64_t n = numel(t.shape);
    f32.resize(size_t(n));
    files.read_f32(t.name, f32.data());
    scratch.resize(size_t(n * dtype_size(t.dtype)));
    convert_from_f32(t.dtype, f32.data(), scratch.data(), n);
    return scratch.data();
  };
  if (widened) log_info(widened, " fp8 or scaled tensors dequantised and written as bf16");
  if (skipped) log_info("the weights have no DSA offset network (", skipped, " parameters); none is written");
  if (const std::string w = attention_export_warning(src.config, format); !w.empty()) log_warn(w);
  write_model_files(dir, format, src.config, tensors, shard_bytes, "", bytes);
  return tensors.size();
}

// A Wan2.2 A14B folder's two experts into tmp in `format`'s layout: Wan's high_noise_model/ and low_noise_model/,
// or diffusers' transformer/ and transformer_2/ with model_index.json's boundary_ratio.
size_t convert_experts(const std::string& in, const std::string& config, const fs::path& tmp, SaveFormat format,
                       DTypeChoice dtype, int64_t shard_bytes) {
  if (format == SaveFormat::megaslide)
    MS_FAIL("'", in, "' holds two experts; --to megaslide writes one model: convert ", in,
            "/high_noise_model (or the low one) alone, or write both with --to wan or --to diffusers");
  const ModelSource high = resolve_model(in, config, Expert::high), low = resolve_model(in, config, Expert::low);
  const double boundary = expert_boundary(0, high.boundary);
  size_t n = 0;
  if (format == SaveFormat::wan) {
    if (high.boundary > 0 && high.boundary != kWanT2vA14bBoundary)
      log_warn("the folder's boundary_ratio ", high.boundary, " is not kept: Wan's layout records none (Wan's code ",
               "uses ", kWanT2vA14bBoundary, "); pass --boundary ", high.boundary, " to train and sample");
    for (const auto& [src, sub] : {std::pair{&high, "high_noise_model"}, std::pair{&low, "low_noise_model"}}) {
      fs::create_directories(tmp / sub);
      n += convert_into(*src, (tmp / sub).string(), format, dtype, shard_bytes);
    }
    return n;
  }
  n += convert_into(high, tmp.string(), format, dtype, shard_bytes);  // tmp/transformer
  const fs::path second = tmp / "second";
  fs::create_directories(second);
  n += convert_into(low, second.string(), format, dtype, shard_bytes);
  fs::rename(second / "transformer", tmp / "transformer_2");
  fs::remove(second);
  write_file_atomic((tmp / "model_index.json").string(),
                    nlohmann::json{{"_class_name", "WanPipeline"},
                                   {"boundary_ratio", boundary},
                                   {"transformer", {"diffusers", "WanTransformer3DModel"}},
                                   {"transformer_2", {"diffusers", "WanTransformer3DModel"}}}
                        .dump(2));
  return n;
}

void run_convert(const ConvertArgs& a) {
  const SaveFormat format = parse_name<SaveFormat>(a.to, "--to");
  DTypeChoice dtype;
  dtype.force = !a.dtype.empty();
  if (dtype.force && a.dtype != "bf16" && a.dtype != "f16" && a.dtype != "f32")
    MS_FAIL("--dtype ", quote_text(a.dtype), " is not one of bf16, f16, f32");
  if (dtype.force) dtype.to = a.dtype == "bf16" ? DType::bf16 : a.dtype == "f16" ? DType::f16 : DType::f32;
  const int64_t shard_bytes = parse_bytes(a.shard_size, "--shard-size");
  if (shard_bytes <= 0) MS_FAIL("--shard-size must be positive");
  std::error_code ec;
  if (fs::exists(a.out, ec) && !(fs::is_directory(a.out, ec) && fs::is_empty(a.out, ec)))
    MS_FAIL("'", a.out, "' exists and is not an empty directory; convert writes a new directory, so choose another ",
            "OUT (nothing was changed)");
  const bool experts = !expert_folders(a.in)[0].empty();
  const ModelSource src = experts ? ModelSource{} : resolve_model(a.in, a.config);

  // Written into OUT.tmp-PID beside OUT, then renamed: an interrupted conversion leaves no half-written OUT.
  fs::path out = fs::path(a.out).lexically_normal();
  if (!out.has_filename()) out = out.parent_path();  // "out/"
  const fs::path tmp = fs::path(out).concat(".tmp-" + std::to_string(::getpid()));
  fs::remove_all(tmp, ec);
  if (!fs::create_directories(tmp, ec) && ec) MS_FAIL("cannot create '", tmp.string(), "': ", ec.message());
  size_t tensors = 0;
  try {
    tensors = experts ? convert_experts(a.in, a.config, tmp, format, dtype, shard_bytes)
                      : convert_into(src, tmp.string(), format, dtype, shard_bytes);
    fs::remove(out, ec);  // the empty directory checked above, if any
    fs::rename(tmp, out, ec);
    if (ec) MS_FAIL("cannot rename '", tmp.string(), "' to '", out.string(), "': ", ec.message());
    fsync_dir(out.has_parent_path() ? out.parent_path().string() : ".");
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  log_info("wrote ", a.out, " (", name_of(format), experts ? ", two experts, " : ", ", tensors, " tensors)");
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* cmd =
      app.add_subcommand("convert", "Write a DiT's weights in the layout Wan, diffusers or megaslide reads");
  cmd->add_option("IN", args->in,
                  "A model: directory (ours, Wan's, diffusers'), .safetensors or .pth file (ComfyUI single files: "
                  "the config is inferred), or a sharded index")
      ->required();
  cmd->add_option("OUT", args->out, "The new directory to write")->required();
  cmd->add_option("--to", args->to, "wan, diffusers or megaslide")->required();
  cmd->add_option("--dtype", args->dtype, "bf16, f16 or f32 (default: each tensor's own; fp8 becomes bf16)");
  cmd->add_option("--config", args->config,
                  "config.json for IN when it has none and its shapes are not a known Wan2.1's");
  cmd->add_option("--shard-size", args->shard_size, "Largest weights file before sharding (wan, diffusers)")
      ->capture_default_str();
  cmd->callback([args] { run_convert(*args); });
}

}  // namespace ms::cli
