// A set of safetensors files opened as one name space (a checkpoint, possibly sharded).
//
// Names are stored with the first matching prefix of "model.diffusion_model.", "diffusion_model.",
// "model." stripped (DESIGN.md §3), so Wan checkpoints saved by other tools resolve to Wan keys.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace ms {

class WeightFiles {
 public:
  // path is one of:
  //  - a .safetensors file;
  //  - an index json ("*.safetensors.index.json", HF form {"weight_map": {name: shard}}, shard
  //    paths relative to the index's directory); every shard it names is opened in full;
  //  - a directory: its one "*.safetensors.index.json" if it has exactly one, else all its
  //    "*.safetensors" files (sorted by name).
  // Throws ms::Error when nothing holds weights, a file is invalid, an index names a missing shard
  // or a tensor its shard lacks, or two tensors have the same name after prefix stripping.
  static WeightFiles open(const std::string& path);

  // Whether dir is a directory holding at least one "*.safetensors" file.
  static bool has_weights(const std::string& dir);

  const SafetensorsEntry* find(const std::string& name) const;  // stripped name; null if absent
  std::vector<std::string> names() const;                       // stripped names, sorted
  const std::string& file_of(const std::string& name) const;    // path of the file holding name

 private:
  struct Slot {
    size_t file;  // index into files_
    const SafetensorsEntry* entry;
  };

  void add(SafetensorsFile f);
  void add_index(const std::string& index_path);

  std::vector<SafetensorsFile> files_;
  std::map<std::string, Slot> by_name_;  // stripped name -> where it lives
};

}  // namespace ms
