#include "model/export.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/log.h"
#include "io/atomic_file.h"
#include "model/name_map.h"

namespace ms {

namespace {

namespace fs = std::filesystem;

constexpr const char* kWeightsBase = "diffusion_pytorch_model";
const std::map<std::string, std::string> kMetadata{{"format", "pt"}};  // what safetensors' torch writer records

int64_t bytes_of(const TensorRef& t) { return numel(t.shape) * dtype_size(t.dtype); }

// Writes tensors as DIR/diffusion_pytorch_model.safetensors, or as shards of at most shard_bytes (a tensor larger
// than that gets a shard of its own) with the index json that names each tensor's shard; tensor i's bytes from
// bytes(i, scratch).
void write_sharded(const fs::path& dir, const std::vector<TensorRef>& tensors, int64_t shard_bytes,
                   const std::string& linked_from, const TensorBytes& bytes) {
  std::vector<std::vector<size_t>> shards(1);  // indices into tensors
  int64_t in_shard = 0, total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t n = bytes_of(tensors[i]);
    if (!shards.back().empty() && in_shard + n > shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += n;
    total += n;
  }
  const std::string single = (dir / (std::string(kWeightsBase) + ".safetensors")).string();
  if (shards.size() == 1) {
    std::error_code ec;
    if (!linked_from.empty()) {
      fs::create_hard_link(linked_from, single, ec);
      if (!ec) return;
      log_info("cannot hard-link ", single, " to ", linked_from, " (", ec.message(), "); writing a copy");
    }
    write_safetensors(single, tensors, kMetadata, bytes);
    return;
  }
  nlohmann::json index{{"metadata", {{"total_size", total}}}, {"weight_map", nlohmann::json::object()}};
  const size_t n = shards.size();
  for (size_t k = 0; k < n; ++k) {
    char name[96];
    std::snprintf(name, sizeof name, "%s-%05zu-of-%05zu.safetensors", kWeightsBase, k + 1, n);
    std::vector<TensorRef> refs;
    for (size_t i : shards[k]) refs.push_back(tensors[i]);
    write_safetensors((dir / name).string(), refs, kMetadata,
                      [&](size_t j, std::vector<uint8_t>& scratch) { return bytes(shards[k][j], scratch); });
    for (const TensorRef& t : refs) index["weight_map"][t.name] = name;
  }
  write_file_atomic((dir / (std::string(kWeightsBase) + ".safetensors.index.json")).string(), index.dump(2) + "\n");
}

}  // namespace

std::unique_ptr<SafetensorsWriter> model_file_writer(const std::string& dir, const std::vector<TensorRef>& tensors) {
  return std::make_unique<SafetensorsWriter>((fs::path(dir) / "model.safetensors").string(), tensors, kMetadata);
}

void finish_model_files(const std::string& dir, SaveFormat format, const ModelConfig& config) {
  const fs::path d(dir);
  write_file_atomic((d / "config.json").string(), config_to_json(config).dump(2) + "\n");
  if (format == SaveFormat::megaslide) return;
  const std::string model = (d / "model.safetensors").string();
  const SafetensorsFile f = SafetensorsFile::open(model);  // mapped: its pages, not a copy
  std::vector<TensorRef> tensors;
  for (const TensorEntry& e : f.entries()) tensors.push_back({e.name, e.dtype, e.shape, e.data});
  write_model_files(dir, format, config, tensors, kShardBytes, model);
}

std::string attention_export_warning(const ModelConfig& config, SaveFormat format) {
  if (format == SaveFormat::megaslide || config.attention.type == AttentionType::dense) return {};
  return cat("the model uses ", config.attention.type, " attention, but Wan, diffusers and ComfyUI run dense ",
             "attention and ignore its attention config", config.attention.has_offsets() ? " and offset network" : "",
             ": in those tools it will not behave as trained here");
}

void write_model_files(const std::string& dir, SaveFormat format, const ModelConfig& config,
                       const std::vector<TensorRef>& tensors, int64_t shard_bytes, const std::string& linked_from,
                       TensorBytes bytes) {
  if (!bytes) bytes = [&](size_t i, std::vector<uint8_t>&) { return tensors[i].data; };
  const fs::path d(dir);
  switch (format) {
    case SaveFormat::megaslide:
      write_safetensors((d / "model.safetensors").string(), tensors, kMetadata, bytes);
      write_file_atomic((d / "config.json").string(), config_to_json(config).dump(2) + "\n");
      return;
    case SaveFormat::wan:
      write_sharded(d, tensors, shard_bytes, linked_from, bytes);
      write_file_atomic((d / "config.json").string(), config_to_json(config).dump(2) + "\n");
      return;
    case SaveFormat::diffusers: {
      const fs::path t = d / "transformer";
      std::error_code ec;
      fs::create_directories(t, ec);
      if (ec) MS_FAIL("cannot create '", t.string(), "': ", ec.message());
      std::vector<TensorRef> renamed = tensors;
      for (TensorRef& r : renamed) {
        const std::string name = wan_to_diffusers(r.name);
        if (name.empty()) MS_FAIL("parameter '", r.name, "' has no diffusers name; it cannot be saved for diffusers");
        r.name = name;
      }
      write_sharded(t, renamed, shard_bytes, "", bytes);
      write_file_atomic((t / "config.json").string(), config_to_diffusers(config).dump(2) + "\n");
      return;
    }
  }
}

}  // namespace ms
