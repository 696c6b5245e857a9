// A set of weight files opened as one name space (a checkpoint, possibly sharded): safetensors files and PyTorch
// zip checkpoints (.pth/.pt, io/pth.h) alike.
//
// Names are stored with the first matching prefix of "model.diffusion_model.", "diffusion_model.", "model."
// stripped (docs/model.md), so Wan checkpoints saved by other tools resolve to Wan keys. ComfyUI's scaled fp8 files
// are understood: a `X.scale_weight` tensor scales `X.weight` when it is read (read_f32), and the `scaled_fp8`
// marker and `X.scale_input` tensors (activation scales for fp8 matmuls) are consumed, not listed.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/pth.h"
#include "io/safetensors.h"

namespace ms {

class WeightFiles {
 public:
  // path is one of:
  //  - a .safetensors file, or a .pth/.pt file (or any file that starts like a zip archive);
  //  - an index json ("*.safetensors.index.json", HF form {"weight_map": {name: shard}}, shard
  //    paths relative to the index's directory); every shard it names is opened in full;
  //  - a directory: its one "*.safetensors.index.json" if it has exactly one, else all its
  //    "*.safetensors" files (sorted by name), else all its "*.pth" and "*.pt" files.
  // Throws ms::Error when nothing holds weights, a file is invalid, an index names a missing shard
  // or a tensor its shard lacks, or two tensors have the same name after prefix stripping.
  static WeightFiles open(const std::string& path);

  // Whether dir is a directory holding at least one "*.safetensors", "*.pth" or "*.pt" file.
  static bool has_weights(const std::string& dir);

  const TensorEntry* find(const std::string& name) const;     // stripped name; null if absent
  std::vector<std::string> names() const;                       // stripped names, sorted
  const std::string& file_of(const std::string& name) const;    // path of the file holding name
  bool scaled(const std::string& name) const;                   // whether name has a scale_weight

  // name's numel values as f32 into dst: the stored values widened (fp8 exactly), times its scale_weight when it
  // has one (one scale, or one per row of dim 0).
  void read_f32(const std::string& name, float* dst) const;
  // The same for rows [row0, row0 + rows) along dim 0 (a layer's weight panel by panel, an embedding's used rows).
  void read_rows_f32(const std::string& name, int64_t row0, int64_t rows, float* dst) const;

  // Renames every tensor to map(name); map returns "" to keep a name. Throws when two names map to one.
  void rename(const std::function<std::string(const std::string&)>& map);

 private:
  struct Slot {
    size_t file;                         // index into paths_
    const TensorEntry* entry;
    const TensorEntry* scale = nullptr;  // ComfyUI scale_weight
  };

  void add(const std::string& path, const std::vector<TensorEntry>& entries);
  void add_index(const std::string& index_path);
  void pair_scales();  // moves `X.scale_weight` onto `X.weight`, drops fp8 markers

  std::vector<SafetensorsFile> safetensors_;
  std::vector<PthFile> pth_;
  std::vector<std::string> paths_;
  std::map<std::string, Slot> by_name_;  // stripped name -> where it lives
};

}  // namespace ms
