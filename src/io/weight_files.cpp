#include "io/weight_files.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/check.h"

namespace ms {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kIndexSuffix = ".safetensors.index.json";
constexpr const char* kWeightsSuffix = ".safetensors";

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
    MS_FAIL(path, ": no such file or directory; pass a .safetensors file, an index json or a directory holding them");
  WeightFiles w;
  if (!fs::is_directory(st)) {
    if (path.ends_with(".json"))
      w.add_index(path);
    else
      w.add(SafetensorsFile::open(path));
    return w;
  }
  const std::vector<std::string> indices = files_ending(path, kIndexSuffix);
  if (indices.size() == 1) {
    w.add_index(indices[0]);
    return w;
  }
  const std::vector<std::string> shards = files_ending(path, kWeightsSuffix);
  if (shards.empty())
    MS_FAIL(
        path,
        ": the directory holds no *.safetensors weight files; point at the directory or file that holds the weights");
  for (const std::string& s : shards) w.add(SafetensorsFile::open(s));
  return w;
}

bool WeightFiles::has_weights(const std::string& dir) {
  std::error_code ec;
  return fs::is_directory(dir, ec) && !files_ending(dir, kWeightsSuffix).empty();
}

void WeightFiles::add(SafetensorsFile f) {
  files_.push_back(std::move(f));  // entry pointers survive later moves of the file
  const size_t file = files_.size() - 1;
  for (const SafetensorsEntry& e : files_[file].entries()) {
    auto [it, fresh] = by_name_.emplace(strip_prefix(e.name), Slot{file, &e});
    if (!fresh)
      MS_FAIL("tensor '", it->first, "' is in both ", files_[it->second.file].path(), " (as '", it->second.entry->name,
              "') and ", files_[file].path(), " (as '", e.name, "'); remove one copy or load only one of the files");
  }
}

void WeightFiles::add_index(const std::string& index_path) {
  std::ifstream in(index_path, std::ios::binary);
  if (!in) MS_FAIL(index_path, ": cannot open (", std::strerror(errno), "); check the path and its permissions");
  json index;
  try {
    index = json::parse(in);
  } catch (const json::exception& e) {
    MS_FAIL(index_path, ": not valid JSON (", e.what(), "); the index file is corrupt");
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    MS_FAIL(index_path, ": has no \"weight_map\" object; an index has the form {\"weight_map\": {tensor: shard file}}");

  std::map<std::string, std::vector<std::string>> by_shard;  // shard file -> the tensors the index puts there
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) MS_FAIL(index_path, ": weight_map entry for '", name, "' is not a shard file name");
    by_shard[shard.get<std::string>()].push_back(name);
  }
  if (by_shard.empty()) MS_FAIL(index_path, ": weight_map is empty; the index lists no tensors");

  const fs::path dir = fs::path(index_path).parent_path();
  for (const auto& [shard, names] : by_shard) {
    const std::string shard_path = (dir / shard).string();
    std::error_code ec;
    if (!fs::is_regular_file(shard_path, ec))
      MS_FAIL(index_path, ": maps tensor '", names[0], "' to shard '", shard, "', which does not exist (looked for ",
              shard_path, "); copy the missing shard next to the index or fix the index");
    SafetensorsFile f = SafetensorsFile::open(shard_path);
    for (const std::string& name : names)
      if (!f.find(name))
        MS_FAIL(index_path, ": maps tensor '", name, "' to ", shard_path,
                ", which has no such tensor; the index and its shards are out of sync");
    add(std::move(f));
  }
}

const SafetensorsEntry* WeightFiles::find(const std::string& name) const {
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
    MS_FAIL("no tensor '", name, "' in the weight files; check the checkpoint matches the model");
  return files_[it->second.file].path();
}

}  // namespace ms
