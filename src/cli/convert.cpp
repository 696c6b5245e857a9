// `megaslide convert IN OUT --to wan|diffusers|megaslide`: a DiT's weights from any form megaslide reads (our
// checkpoints, Wan's and diffusers' folders, ComfyUI single files, fp8, .pth) into the layout another tool reads.
#include <unistd.h>

#include <filesystem>
#include <memory>

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

void run_convert(const ConvertArgs& a) {
  const SaveFormat format = parse_name<SaveFormat>(a.to, "--to");
  DType forced = DType::bf16;
  const bool force = !a.dtype.empty();
  if (force && a.dtype != "bf16" && a.dtype != "f16" && a.dtype != "f32")
    MS_FAIL("--dtype ", quote_text(a.dtype), " is not one of bf16, f16, f32");
  if (force) forced = a.dtype == "bf16" ? DType::bf16 : a.dtype == "f16" ? DType::f16 : DType::f32;
  const int64_t shard_bytes = parse_bytes(a.shard_size, "--shard-size");
  if (shard_bytes <= 0) MS_FAIL("--shard-size must be positive");
  std::error_code ec;
  if (fs::exists(a.out, ec) && !(fs::is_directory(a.out, ec) && fs::is_empty(a.out, ec)))
    MS_FAIL("'", a.out, "' exists and is not an empty directory; convert writes a new directory, so choose another ",
            "OUT (nothing was changed)");

  const ModelSource src = resolve_model(a.in, a.config);
  if (src.weights.empty()) MS_FAIL("'", a.in, "' holds no weights to convert");
  const WeightFiles files = open_model_weights(src.weights);
  const ParamTable table(src.config);

  // Each parameter as stored (bytes copied unchanged from the mapped file, so round trips are exact), or converted
  // through f32 when --dtype asks for another type or the stored one is fp8 (scaled or not): those are written as
  // bf16, each converted as it is written, so memory holds one tensor rather than the model.
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
    const DType to = force ? forced : quantised ? DType::bf16 : e->dtype;
    const bool copied = to == e->dtype && !files.scaled(p.name);
    tensors.push_back({p.name, to, p.shape, copied ? e->data : nullptr});
    widened += !copied && quantised && !force;
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

  // Written into OUT.tmp-PID beside OUT, then renamed: an interrupted conversion leaves no half-written OUT.
  fs::path out = fs::path(a.out).lexically_normal();
  if (!out.has_filename()) out = out.parent_path();  // "out/"
  const fs::path tmp = fs::path(out).concat(".tmp-" + std::to_string(::getpid()));
  fs::remove_all(tmp, ec);
  if (!fs::create_directories(tmp, ec) && ec) MS_FAIL("cannot create '", tmp.string(), "': ", ec.message());
  try {
    write_model_files(tmp.string(), format, src.config, tensors, shard_bytes, "", bytes);
    fs::remove(out, ec);  // the empty directory checked above, if any
    fs::rename(tmp, out, ec);
    if (ec) MS_FAIL("cannot rename '", tmp.string(), "' to '", out.string(), "': ", ec.message());
    fsync_dir(out.has_parent_path() ? out.parent_path().string() : ".");
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  log_info("wrote ", a.out, " (", name_of(format), ", ", tensors.size(), " tensors)");
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
