#include "io/weight_files.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/text.h"

namespace ms {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kIndexSuffix = ".safetensors.index.json";
constexpr const char* kWeightsSuffix = ".safetensors";
constexpr const char* kScaleSuffix = ".scale_weight";

std::string strip_prefix(const std::string& name) {
  for (const char* p : {"model.diffusion_model.", "diffusion_model.", "model."})
    if (name.starts_with(p)) return name.substr(std::strlen(p));
  return name;
}

// Paths of the regular files in dir whose names end with suffix, sorted.
std::vector<std::string> files_ending(const std::string& dir, const char* suffix) {
  std::vector<std::string> out;
  try {
    for (const fs::directory_entry& d : fs::directory_iterator(dir))
      if (d.is_regular_file() && d.path().filename().string().ends_with(suffix)) out.push_back(d.path().string());
  } catch (const fs::filesystem_error& e) {
    MS_FAIL(dir, ": cannot list the directory (", e.code().message(), ")");
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

WeightFiles WeightFiles::open(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st))
    MS_FAIL(path,
            ": no such file or directory; pass a .safetensors or .pth file, an index json or a directory "
            "holding them");
  WeightFiles w;
  auto add_file = [&w](const std::string& file) {
    if (PthFile::is_pth(file)) {
      w.pth_.push_back(PthFile::open(file));  // entry pointers survive later moves of the file
      w.add(file, w.pth_.back().entries());
    } else {
      w.safetensors_.push_back(SafetensorsFile::open(file));
      w.add(file, w.safetensors_.back().entries());
    }
  };
  if (!fs::is_directory(st)) {
    if (path.ends_with(".json"))
      w.add_index(path);
    else
      add_file(path);
  } else if (const std::vector<std::string> indices = files_ending(path, kIndexSuffix); indices.size() == 1) {
    w.add_index(indices[0]);
  } else {
    std::vector<std::string> files = files_ending(path, kWeightsSuffix);
    if (files.empty()) {
      files = files_ending(path, ".pth");
      for (const std::string& f : files_ending(path, ".pt")) files.push_back(f);
    }
    if (files.empty())
      MS_FAIL(path,
              ": the directory holds no *.safetensors or *.pth weight files; point at the directory or file "
              "that holds the weights");
    for (const std::string& f : files) add_file(f);
  }
  w.pair_scales();
  return w;
}

bool WeightFiles::has_weights(const std::string& dir) {
  std::error_code ec;
  return fs::is_directory(dir, ec) && (!files_ending(dir, kWeightsSuffix).empty() ||
                                       !files_ending(dir, ".pth").empty() || !files_ending(dir, ".pt").empty());
}

void WeightFiles::add(const std::string& path, const std::vector<TensorEntry>& entries) {
  paths_.push_back(path);
  const size_t file = paths_.size() - 1;
  for (const TensorEntry& e : entries) {
    auto [it, fresh] = by_name_.emplace(strip_prefix(e.name), Slot{file, &e});
    if (!fresh)
      MS_FAIL("tensor ", quote_text(it->first), " is in both ", escape_text(paths_[it->second.file]), " (as ",
              quote_text(it->second.entry->name), ") and ", escape_text(path), " (as ", quote_text(e.name),
              "); remove one copy or load only one of the files");
  }
}

void WeightFiles::pair_scales() {
  by_name_.erase("scaled_fp8");  // ComfyUI's marker: its dtype names the fp8 format the weights already carry
  for (auto it = by_name_.begin(); it != by_name_.end();) {
    const std::string& name = it->first;
    if (name.ends_with(".scale_input")) {  // the input scale of an fp8 matmul, not a weight
      it = by_name_.erase(it);
      continue;
    }
    if (!name.ends_with(kScaleSuffix)) {
      ++it;
      continue;
    }
    const std::string weight = name.substr(0, name.size() - std::strlen(kScaleSuffix)) + ".weight";
    auto w = by_name_.find(weight);
    const TensorEntry& scale = *it->second.entry;
    if (w == by_name_.end())
      MS_FAIL(paths_[it->second.file], ": ", quote_text(name), " scales ", quote_text(weight),
              ", which the files lack; the checkpoint is incomplete");
    const Shape& ws = w->second.entry->shape;
    const int64_t n = numel(scale.shape);
    if (n != 1 && (ws.empty() || n != ws[0] || n == 0))
      MS_FAIL(paths_[it->second.file], ": ", quote_text(name), " has shape ", shape_str(scale.shape),
              ", neither one "
              "scale nor one per row of ",
              quote_text(weight), " ", shape_str(ws), "; megaslide cannot dequantise it");
    w->second.scale = &scale;
    it = by_name_.erase(it);
  }
}

void WeightFiles::add_index(const std::string& index_path) {
  std::ifstream in(index_path, std::ios::binary);
  if (!in) MS_FAIL(index_path, ": cannot open (", std::strerror(errno), "); check the path and its permissions");
  json index;
  try {
    index = json::parse(in);
  } catch (const json::exception& e) {
    MS_FAIL(index_path, ": not valid JSON (", escape_text(e.what()), "); the index file is corrupt");
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    MS_FAIL(index_path, ": has no \"weight_map\" object; an index has the form {\"weight_map\": {tensor: shard file}}");

  std::map<std::string, std::vector<std::string>> by_shard;  // shard file -> the tensors the index puts there
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string())
      MS_FAIL(index_path, ": weight_map entry for ", quote_text(name), " is not a shard file name");
    by_shard[shard.get<std::string>()].push_back(name);
  }
  if (by_shard.empty()) MS_FAIL(index_path, ": weight_map is empty; the index lists no tensors");

  const fs::path dir = fs::path(index_path).parent_path();
  for (const auto& [shard, names] : by_shard) {
    const std::string shard_path = (dir / shard).string();
    std::error_code ec;
    if (!fs::is_regular_file(shard_path, ec))
      MS_FAIL(index_path, ": maps tensor ", quote_text(names[0]), " to shard ", quote_text(shard),
              ", which does not exist (looked for ", escape_text(shard_path),
              "); copy the missing shard next to the index or fix the index");
    safetensors_.push_back(SafetensorsFile::open(shard_path));
    for (const std::string& name : names)
      if (!safetensors_.back().find(name))
        MS_FAIL(index_path, ": maps tensor ", quote_text(name), " to ", escape_text(shard_path),
                ", which has no such tensor; the index and its shards are out of sync");
    add(shard_path, safetensors_.back().entries());
  }
}

const TensorEntry* WeightFiles::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second.entry;
}

std::vector<std::string> WeightFiles::names() const {
  std::vector<std::string> out;
  out.reserve(by_name_.size());
  for (const auto& [name, slot] : by_name_) out.push_back(name);
  return out;
}

const std::string& WeightFiles::file_of(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end())
    MS_FAIL("no tensor ", quote_text(name), " in the weight files; check the checkpoint matches the model");
  return paths_[it->second.file];
}

bool WeightFiles::scaled(const std::string& name) const {
  auto it = by_name_.find(name);
  return it != by_name_.end() && it->second.scale;
}

void WeightFiles::read_f32(const std::string& name, float* dst) const {
  const TensorEntry* e = find(name);
  read_rows_f32(name, 0, e && !e->shape.empty() ? e->shape[0] : 1, dst);
}

void WeightFiles::read_rows_f32(const std::string& name, int64_t row0, int64_t rows, float* dst) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end())
    MS_FAIL("no tensor ", quote_text(name), " in the weight files; check the checkpoint matches the model");
  const TensorEntry& e = *it->second.entry;
  if (e.shape.empty()) {  // a scalar: one "row"
    MS_CHECK(row0 == 0 && rows == 1, "row ", row0, " of the scalar ", quote_text(name));
    read_as_f32(e, dst);
  } else {
    read_as_f32(row_slice(e, row0, rows), dst);
  }
  if (!it->second.scale) return;
  std::vector<float> scale(size_t(numel(it->second.scale->shape)));
  read_as_f32(*it->second.scale, scale.data());
  // one scale for the whole tensor, or one per row of dim 0
  const int64_t per_row = e.shape.empty() ? 1 : numel(e.shape) / e.shape[0], n = rows * per_row;
  for (int64_t i = 0; i < n; ++i) dst[i] *= scale.size() == 1 ? scale[0] : scale[size_t(row0 + i / per_row)];
}

void WeightFiles::rename(const std::function<std::string(const std::string&)>& map) {
  std::map<std::string, Slot> renamed;
  for (auto& [name, slot] : by_name_) {
    std::string to = map(name);
    if (to.empty()) to = name;
    auto [it, fresh] = renamed.emplace(to, slot);
    if (!fresh)
      MS_FAIL(paths_[slot.file], ": tensors ", quote_text(it->second.entry->name), " and ",
              quote_text(slot.entry->name), " both stand for ", quote_text(to),
              "; the checkpoint mixes two naming schemes");
  }
  by_name_ = std::move(renamed);
}

}  // namespace ms
