#include "data/latent_cache.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "core/check.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/text.h"
#include "io/safetensors.h"

namespace fs = std::filesystem;

namespace ms {
namespace {

constexpr const char* kLatentSuffix = "_wan.safetensors";
constexpr const char* kTextSuffix = "_wan_te.safetensors";

std::string shape_text(const Shape& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// The float dtype torch's name (musubi's key suffix) stands for.
bool torch_dtype(const std::string& name, DType* out) {
  if (name == "bfloat16")
    *out = DType::bf16;
  else if (name == "float16")
    *out = DType::f16;
  else if (name == "float32")
    *out = DType::f32;
  else
    return false;
  return true;
}

// A musubi latent file's name: the item key and whether the name carries a video clip's pos-count field.
struct LatentName {
  std::string item;
  bool video = false;
};

// Parses {item}[_{pos:05d}-{count:03d}[-NN]]_{W:04d}x{H:04d}_wan.safetensors; throws naming the file.
LatentName parse_latent_name(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  const std::string body = name.substr(0, name.size() - std::string(kLatentSuffix).size());
  std::vector<std::string> fields;
  for (size_t begin = 0;;) {
    const size_t end = body.find('_', begin);
    fields.push_back(body.substr(begin, end - begin));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  static const std::regex size(R"(\d+x\d+)"), pos_count(R"(\d+-\d+(-\d+)?)");
  if (fields.size() < 2 || !std::regex_match(fields.back(), size))
    MS_FAIL("'", path, "': the name lacks musubi-tuner's {item}_{W}x{H}_wan.safetensors size field");
  const bool video = fields.size() >= 3 && std::regex_match(fields[fields.size() - 2], pos_count);
  const size_t keep = fields.size() - (video ? 2 : 1);
  LatentName out{fields[0], video};
  for (size_t i = 1; i < keep; ++i) out.item += "_" + fields[i];
  if (out.item.empty()) MS_FAIL("'", path, "': the name has an empty item key");
  return out;
}

// The architecture metadata, when present, must be Wan's.
void check_architecture(const SafetensorsFile& f) {
  const auto it = f.metadata().find("architecture");
  if (it != f.metadata().end() && it->second != "wan")
    MS_FAIL("'", f.path(), "' is a musubi-tuner cache of architecture ", quote_text(it->second),
            ", not wan; cache the data for Wan (wan_cache_latents.py) or point cache_directory elsewhere");
}

// The one tensor of f named `prefix`{dims}_{dtype} (dims matched by `dims`, dtype a torch float name), whose
// stored dtype and rank must agree with its name. Throws naming the file.
const TensorEntry& keyed_tensor(const SafetensorsFile& f, const std::string& prefix, const std::string& dims,
                                size_t rank, const char* what) {
  const std::regex key(prefix + dims + "_([a-z0-9]+)");
  const TensorEntry* found = nullptr;
  std::smatch m;
  for (const TensorEntry& e : f.entries()) {
    if (!std::regex_match(e.name, m, key)) continue;
    if (found)
      MS_FAIL("'", f.path(), "' holds two ", what, " tensors (", quote_text(found->name), " and ", quote_text(e.name),
              ")");
    found = &e;
    DType named;
    if (!torch_dtype(m[m.size() - 1].str(), &named))
      MS_FAIL("'", f.path(), "': tensor ", quote_text(e.name), " names dtype ", quote_text(m[m.size() - 1].str()),
              "; a cache holds bfloat16, float16 or float32");
    if (named != e.dtype)
      MS_FAIL("'", f.path(), "': tensor ", quote_text(e.name), " is stored as ", dtype_name(e.dtype),
              ", not as its name says");
    if (e.shape.size() != rank)
      MS_FAIL("'", f.path(), "': tensor ", quote_text(e.name), " has shape ", shape_text(e.shape), "; expected rank ",
              rank);
  }
  if (!found)
    MS_FAIL("'", f.path(), "' has no ", what, " tensor (", prefix, "…_<dtype>); is it a musubi-tuner Wan cache file?");
  return *found;
}

// A text embedding [L, text_dim] with 1 <= L <= text_len.
void check_context(const std::string& path, const TensorEntry& ctx, int64_t text_len, int64_t text_dim) {
  if (ctx.shape.size() != 2 || ctx.shape[1] != text_dim || ctx.shape[0] < 1 || ctx.shape[0] > text_len)
    MS_FAIL("'", path, "': text embedding '", ctx.name, "' ", shape_text(ctx.shape),
            " does not fit the model: it needs [L, ", text_dim, "] with 1 <= L <= text_len ", text_len);
}

// The embedding of a musubi text-encoder cache file, checked against the model.
const TensorEntry& text_entry(const SafetensorsFile& f, int64_t text_len, int64_t text_dim) {
  check_architecture(f);
  const TensorEntry& e = keyed_tensor(f, "varlen_t5", "", 2, "text-embedding (varlen_t5_*)");
  check_context(f.path(), e, text_len, text_dim);
  return e;
}

// Reads e as f32; non-finite values make the file bad.
std::vector<float> finite_f32(const SafetensorsFile& f, const TensorEntry& e) {
  std::vector<float> out(size_t(numel(e.shape)));
  read_as_f32(e, out.data());
  for (float x : out)
    if (!std::isfinite(x)) MS_FAIL("'", f.path(), "': '", e.name, "' holds non-finite values (NaN or Inf)");
  return out;
}

// Lists and checks the clips of the cache directories (file headers only).
class Lister {
 public:
  explicit Lister(const DataOptions& o) : o_(o) {}

  // A musubi latent file and its text file.
  CacheClip musubi(const std::string& path) {
    const LatentName name = parse_latent_name(path);
    const SafetensorsFile f = SafetensorsFile::open(path);
    check_architecture(f);
    const bool frame_count = f.metadata().count("frame_count") > 0;
    if (frame_count && !name.video)
      MS_FAIL("'", path,
              "' has frame_count metadata (a video clip) but its name lacks the {pos:05d}-{count:03d} "
              "field musubi-tuner writes; re-cache it with wan_cache_latents.py");
    CacheClip c;
    c.latent_file = path;
    const TensorEntry& lat = keyed_tensor(f, "latents_", R"((\d+)x(\d+)x(\d+))", 4, "latent");
    c.latent_key = lat.name;
    c.shape = {lat.shape[0], lat.shape[1], lat.shape[2], lat.shape[3]};
    if (!lat.name.starts_with(cat("latents_", c.shape.frames, "x", c.shape.height, "x", c.shape.width, "_")))
      MS_FAIL("'", path, "': tensor ", quote_text(lat.name), " has shape ", shape_text(lat.shape),
              ", which disagrees with its name");
    channels(path, lat.shape);
    for (const TensorEntry& e : f.entries()) extra(path, e.name);
    c.text_file = (fs::path(path).parent_path() / (name.item + kTextSuffix)).string();
    try {
      c.text_key = text_key(c.text_file);
    } catch (const Error& e) {
      MS_FAIL("'", path, "': ", e.what());
    }
    return c;
  }

  // A megaslide latent file: latents and context together.
  CacheClip megaslide(const std::string& path) {
    const SafetensorsFile f = SafetensorsFile::open(path);
    const TensorEntry* lat = f.find("latents");
    const TensorEntry* ctx = f.find("context");
    if (!lat || !ctx)
      MS_FAIL("'", path,
              "' is neither a musubi-tuner Wan cache file ({item}_…_wan.safetensors) nor a megaslide "
              "latent file (tensors 'latents' and 'context')");
    for (const TensorEntry* e : {lat, ctx})
      if (e->dtype != DType::f32 && e->dtype != DType::f16 && e->dtype != DType::bf16 && e->dtype != DType::f64)
        MS_FAIL("'", path, "': '", e->name, "' is not a float tensor");
    if (lat->shape.size() != 4)
      MS_FAIL("'", path, "': 'latents' has shape ", shape_text(lat->shape), "; expected [C, F, H, W]");
    channels(path, lat->shape);
    context(path, *ctx);
    return {path, "latents", path, "context", {lat->shape[0], lat->shape[1], lat->shape[2], lat->shape[3]}};
  }

 private:
  void channels(const std::string& path, const Shape& lat) const {
    if (lat[0] != o_.in_dim)
      MS_FAIL("'", path, "': latents ", shape_text(lat), " have ", lat[0], " channels but the model's in_dim is ",
              o_.in_dim, "; use a model whose in_dim matches the cache (e.g. a Wan2.1 config for VAE latents)");
    if (lat[1] < 1 || lat[2] < 1 || lat[3] < 1) MS_FAIL("'", path, "': latents ", shape_text(lat), " are empty");
  }

  void context(const std::string& path, const TensorEntry& ctx) const {
    check_context(path, ctx, o_.text_len, o_.text_dim);
  }

  // A tensor beside the latents: a t2v model ignores the i2v and control kinds (one warning each).
  void extra(const std::string& path, const std::string& tensor) {
    if (tensor.starts_with("latents_") && !tensor.starts_with("latents_image_") &&
        !tensor.starts_with("latents_control_"))
      return;
    std::string kind;
    for (const char* k : {"clip_", "latents_image_", "latents_control_", "f_indices_"})
      if (tensor.starts_with(k)) kind = std::string(k) + "*";
    if (kind.empty()) kind = tensor;
    if (warned_.insert(kind).second)
      log_warn("'", path, "' (and maybe more files) holds ", quote_text(kind),
               kind == tensor ? ", a tensor megaslide does not know; ignored"
                              : " (image-to-video or control conditioning); a text-to-video model ignores it");
  }

  // The text file's embedding key, checked once per file (the chunks of a video share it).
  std::string text_key(const std::string& path) {
    auto it = texts_.find(path);
    if (it == texts_.end()) {
      std::string key, problem;
      try {
        std::error_code ec;
        if (!fs::is_regular_file(path, ec))
          MS_FAIL("has no text-encoder file '", path,
                  "'; make it with musubi-tuner's wan_cache_text_encoder_outputs.py (or megaslide text-encode)");
        key = text_entry(SafetensorsFile::open(path), o_.text_len, o_.text_dim).name;
      } catch (const Error& err) {
        problem = err.what();
      }
      it = texts_.emplace(path, std::make_pair(key, problem)).first;
    }
    if (!it->second.second.empty()) MS_FAIL(it->second.second);
    return it->second.first;
  }

  const DataOptions& o_;
  std::set<std::string> warned_;                                      // extra tensor kinds warned about
  std::map<std::string, std::pair<std::string, std::string>> texts_;  // text file -> key, problem
};

}  // namespace

LatentCache::LatentCache(const DatasetFile& file, const std::vector<DatasetEntry>& entries, const DataOptions& o)
    : ItemDataset(cat("dataset file '", file.path, "'"), o.on_bad_data == BadDataPolicy::fatal, o.seed),
      text_len_(o.text_len),
      text_dim_(o.text_dim) {
  Lister lister(o);
  const auto wanted = [&](int64_t value, int64_t requested) { return requested == 0 || value == requested; };
  int64_t other = 0;  // good clips of shapes the requested extents leave out
  for (const DatasetEntry& e : entries) {
    std::error_code ec;
    if (!fs::is_directory(e.cache_directory, ec))
      MS_FAIL("cache_directory '", e.cache_directory, "' (in ", name(), ") does not exist or is not a directory");
    std::vector<std::string> paths;
    for (const auto& f : fs::directory_iterator(e.cache_directory, ec))
      if (f.path().extension() == ".safetensors" && !f.path().filename().string().ends_with(kTextSuffix))
        paths.push_back(f.path().string());
    if (ec) MS_FAIL("cannot list cache_directory '", e.cache_directory, "': ", ec.message());
    std::sort(paths.begin(), paths.end());
    if (paths.empty()) MS_FAIL("cache_directory '", e.cache_directory, "' holds no latent .safetensors files");
    const int64_t batch = (o.batch_size > 0 ? o.batch_size : e.batch_size) * o.ranks;
    for (const std::string& p : paths) {
      CacheClip c;
      try {
        c = p.ends_with(kLatentSuffix) ? lister.musubi(p) : lister.megaslide(p);
      } catch (const Error& err) {
        bad(err.what());
        continue;
      }
      if (!wanted(c.shape.frames, o.frames) || !wanted(c.shape.height, o.height) || !wanted(c.shape.width, o.width)) {
        ++other;
        continue;
      }
      clips_.push_back(std::move(c));
      for (int64_t r = 0; r < e.num_repeats; ++r) add(int64_t(clips_.size()) - 1, clips_.back().shape, batch);
    }
  }
  if (other > 0)
    log_info(name(), ": ", other, " cached clips of other shapes than --frames/--height/--width ask for (", o.frames,
             "x", o.height, "x", o.width, ", 0: any) are left out");
  if (clips_.empty() && other > 0)
    MS_FAIL(name(), ": no cached clip has the requested latent shape (--frames ", o.frames, " --height ", o.height,
            " --width ", o.width, ", in latents; 0: any); drop them to train on every shape the cache holds");
  finish_listing();
}

std::vector<float> read_text_cache(const std::string& path, int64_t text_len, int64_t text_dim) {
  const SafetensorsFile f = SafetensorsFile::open(path);
  return finite_f32(f, text_entry(f, text_len, text_dim));
}

DataSample LatentCache::load(int64_t item) {
  const CacheClip& c = clips_[size_t(item)];
  // Read again: a file may have changed since the dataset was listed.
  const SafetensorsFile lat = SafetensorsFile::open(c.latent_file);
  const TensorEntry* x = lat.find(c.latent_key);
  if (!x || x->shape != Shape{c.shape.channels, c.shape.frames, c.shape.height, c.shape.width})
    MS_FAIL("'", c.latent_file, "' changed since the run listed it: tensor ", quote_text(c.latent_key),
            " is missing or of another shape");
  DataSample s;
  s.x0 = finite_f32(lat, *x);  // [C, F, H, W]
  const SafetensorsFile txt = SafetensorsFile::open(c.text_file);
  const TensorEntry* ctx = txt.find(c.text_key);
  if (!ctx || ctx->shape.size() != 2 || ctx->shape[1] != text_dim_ || ctx->shape[0] < 1 || ctx->shape[0] > text_len_)
    MS_FAIL("'", c.text_file, "' changed since the run listed it: tensor ", quote_text(c.text_key),
            " is missing or of another shape");
  s.context = finite_f32(txt, *ctx);  // [L, text_dim]
  return s;
}

std::string musubi_latent_name(const std::string& file, bool image, int64_t start, int64_t frames, int64_t width,
                               int64_t height) {
  char tail[64];
  if (image)
    std::snprintf(tail, sizeof tail, "_%04lldx%04lld_wan.safetensors", (long long)width, (long long)height);
  else
    std::snprintf(tail, sizeof tail, "_%05lld-%03lld_%04lldx%04lld_wan.safetensors", (long long)start,
                  (long long)frames, (long long)width, (long long)height);
  return fs::path(file).stem().string() + tail;
}

std::string musubi_text_name(const std::string& file) { return fs::path(file).stem().string() + kTextSuffix; }

void write_text_cache(const std::string& path, const float* context, int64_t rows, int64_t dim,
                      const std::string& caption) {
  std::vector<uint16_t> bf16(static_cast<size_t>(rows * dim));
  convert_from_f32(DType::bf16, context, bf16.data(), rows * dim);
  write_safetensors(path, {{"varlen_t5_bfloat16", DType::bf16, {rows, dim}, bf16.data()}},
                    {{"architecture", "wan"}, {"caption1", caption}, {"format_version", "1.0.1"}});
}

void write_latent_cache(const std::string& path, const float* latents, const DataShape& shape, int64_t width,
                        int64_t height, int64_t frame_count) {
  const int64_t n = shape.channels * shape.frames * shape.height * shape.width;
  std::vector<uint16_t> bf16(static_cast<size_t>(n));
  convert_from_f32(DType::bf16, latents, bf16.data(), n);
  std::map<std::string, std::string> meta{{"architecture", "wan"},
                                          {"width", std::to_string(width)},
                                          {"height", std::to_string(height)},
                                          {"format_version", "1.0.1"}};
  if (frame_count > 0) meta["frame_count"] = std::to_string(frame_count);
  write_safetensors(path,
                    {{cat("latents_", shape.frames, "x", shape.height, "x", shape.width, "_bfloat16"),
                      DType::bf16,
                      {shape.channels, shape.frames, shape.height, shape.width},
                      bf16.data()}},
                    meta);
}

}  // namespace ms
