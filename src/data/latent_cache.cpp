#include "data/latent_cache.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/check.h"
#include "io/safetensors.h"

namespace fs = std::filesystem;

namespace ms {
namespace {

std::string shape_text(const Shape& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

const TensorEntry& tensor(const SafetensorsFile& f, const char* name, size_t rank, const char* layout) {
  const TensorEntry* e = f.find(name);
  if (!e) MS_FAIL("'", f.path(), "' has no '", name, "' tensor (a latent cache file holds latents and context)");
  if (e->shape.size() != rank)
    MS_FAIL("'", f.path(), "': '", name, "' has shape ", shape_text(e->shape), "; expected ", layout);
  if (e->dtype != DType::f32 && e->dtype != DType::f16 && e->dtype != DType::bf16 && e->dtype != DType::f64)
    MS_FAIL("'", f.path(), "': '", name, "' is not a float tensor");
  return *e;
}

// Reads e as f32 into out; non-finite values make the file bad.
std::vector<float> finite_f32(const SafetensorsFile& f, const TensorEntry& e) {
  std::vector<float> out(size_t(numel(e.shape)));
  read_as_f32(e, out.data());
  for (float x : out)
    if (!std::isfinite(x)) MS_FAIL("'", f.path(), "': '", e.name, "' holds non-finite values (NaN or Inf)");
  return out;
}

}  // namespace

LatentCache::LatentCache(const DatasetFile& file, const std::vector<DatasetEntry>& entries, const DataOptions& o)
    : ItemDataset(cat("dataset file '", file.path, "'"), o.on_bad_data == BadDataPolicy::fatal, o.seed),
      shape_{o.in_dim, o.frames, o.height, o.width},
      batch_size_(file.batch_size),
      text_len_(o.text_len),
      text_dim_(o.text_dim) {
  for (const DatasetEntry& e : entries) {
    std::error_code ec;
    if (!fs::is_directory(e.cache_directory, ec))
      MS_FAIL("cache_directory '", e.cache_directory, "' (in ", name(), ") does not exist or is not a directory");
    std::vector<std::string> paths;
    for (const auto& f : fs::directory_iterator(e.cache_directory, ec))
      if (f.path().extension() == ".safetensors") paths.push_back(f.path().string());
    std::sort(paths.begin(), paths.end());
    if (paths.empty()) MS_FAIL("cache_directory '", e.cache_directory, "' holds no .safetensors files");
    for (const std::string& p : paths) {
      try {
        check(SafetensorsFile::open(p));
      } catch (const Error& err) {
        bad(err.what());
        continue;
      }
      files_.push_back(p);
      for (int64_t r = 0; r < e.num_repeats; ++r) items_.push_back(int64_t(files_.size()) - 1);
    }
  }
  set_count(int64_t(items_.size()));
}

void LatentCache::check(const SafetensorsFile& f) {
  const std::string& path = f.path();
  const Shape lat = tensor(f, "latents", 4, "[C, F, H, W]").shape;
  const Shape ctx = tensor(f, "context", 2, "[L, text_dim]").shape;
  if (lat[0] != shape_.channels)
    MS_FAIL("'", path, "': latents ", shape_text(lat), " have ", lat[0], " channels but the model's in_dim is ",
            shape_.channels, "; use a model whose in_dim matches the cache (e.g. a Wan2.1 config for VAE latents)");
  if (ctx[1] != text_dim_ || ctx[0] < 1 || ctx[0] > text_len_)
    MS_FAIL("'", path, "': context ", shape_text(ctx), " does not fit the model: it needs [L, ", text_dim_,
            "] with 1 <= L <= text_len ", text_len_);
  if (lat[1] < 1 || lat[2] < 1 || lat[3] < 1) MS_FAIL("'", path, "': latents ", shape_text(lat), " are empty");
  const bool fixed = shape_.frames > 0;  // by the caller or by the first good file
  if (fixed && (lat[1] != shape_.frames || lat[2] != shape_.height || lat[3] != shape_.width))
    MS_FAIL("'", path, "': latents ", shape_text(lat), " differ from the clip shape [", shape_.channels, ", ",
            shape_.frames, ", ", shape_.height, ", ", shape_.width,
            "] (the first file's, or --frames/--height/--width); one cache holds one clip shape");
  if (!fixed) shape_ = {lat[0], lat[1], lat[2], lat[3]};
}

DataSample LatentCache::load(int64_t item) {
  const SafetensorsFile f = SafetensorsFile::open(files_[size_t(items_[size_t(item)])]);
  check(f);  // again: the file may have changed since the dataset was opened
  DataSample s;
  s.x0 = finite_f32(f, *f.find("latents"));       // [C, F, H, W]
  s.context = finite_f32(f, *f.find("context"));  // [L, text_dim]
  return s;
}

}  // namespace ms
