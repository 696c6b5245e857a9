// Writing a DiT's weights in the layouts other tools read (docs/formats.md):
//  - megaslide: DIR/config.json (Wan's form plus `attention`) and DIR/model.safetensors, Wan names, one file;
//  - wan: DIR/config.json and DIR/diffusion_pytorch_model.safetensors, Wan names, which Wan's
//    WanModel.from_pretrained and ComfyUI load; above `shard_bytes` the weights are split into
//    diffusion_pytorch_model-0000K-of-0000N.safetensors shards with diffusion_pytorch_model.safetensors.index.json;
//  - diffusers: DIR/transformer/config.json (diffusers' form) and DIR/transformer/diffusion_pytorch_model*.safetensors
//    with diffusers' names (WanTransformer3DModel.from_pretrained(DIR, subfolder="transformer")), sharded the same way.
// Every file is written atomically (io/safetensors.h); tensors are written in the order given, bytes as given.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/config.h"

namespace ms {

enum class SaveFormat { megaslide, wan, diffusers };
template <>
struct EnumNames<SaveFormat> {
  static constexpr std::array<EnumName<SaveFormat>, 3> values{
      {{SaveFormat::megaslide, "megaslide"}, {SaveFormat::wan, "wan"}, {SaveFormat::diffusers, "diffusers"}}};
};

constexpr int64_t kShardBytes = 5'000'000'000;  // diffusers' and Hugging Face's default max_shard_size "5GB"

// Writes `tensors` (Wan names) and the config in `format` into dir, which exists. For wan, when `linked_from`
// names a safetensors file already holding exactly these tensors (a checkpoint's model.safetensors) and they fit
// in one shard, diffusion_pytorch_model.safetensors is a hard link to it rather than a copy. Tensor i's bytes are
// tensors[i].data, or with `bytes` given bytes(i, scratch), called for each non-empty tensor as it is written (not
// at all when the hard link is made), so that a conversion holds one tensor at a time, not the model.
void write_model_files(const std::string& dir, SaveFormat format, const ModelConfig& config,
                       const std::vector<TensorRef>& tensors, int64_t shard_bytes = kShardBytes,
                       const std::string& linked_from = "", TensorBytes bytes = {});

// The megaslide layout's DIR/model.safetensors for tensors whose bytes arrive in pieces (a distributed save gathers
// them stage by stage): a writer whose header names `tensors` (their data pointers are not read), with the metadata
// write_model_files records. Then finish_model_files writes the rest of write_model_files(dir, format, ...): the
// config and, for wan or diffusers, those tools' files read back from model.safetensors.
std::unique_ptr<SafetensorsWriter> model_file_writer(const std::string& dir, const std::vector<TensorRef>& tensors);
void finish_model_files(const std::string& dir, SaveFormat format, const ModelConfig& config);

// The warning a non-dense model draws when saved for Wan, diffusers or ComfyUI, which run dense attention and
// ignore the offset network; empty for a dense model or the megaslide format.
std::string attention_export_warning(const ModelConfig& config, SaveFormat format);

}  // namespace ms
