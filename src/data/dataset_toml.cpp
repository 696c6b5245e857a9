#include "data/dataset_toml.h"

#include <toml++/toml.h>

#include <filesystem>
#include <set>

#include "core/check.h"
#include "core/text.h"
#include "core/log.h"
#include "io/atomic_file.h"

namespace fs = std::filesystem;

namespace ms {
namespace {

// musubi-tuner keys that megaslide reads past (warned, so nobody thinks they took effect).
const std::set<std::string> kUnsupported = {"enable_bucket",        "bucket_no_upscale", "max_frames",
                                            "image_directory",      "image_jsonl_file",  "control_directory",
                                            "fp_latent_window_size"};

const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date/time";
  }
}

class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path), base_(fs::path(path).parent_path()) {}

  // Applies the keys of table t (section `where`) to e; `general`: the [general] table.
  void apply(const toml::table& t, const std::string& where, bool general, DatasetEntry& e, int64_t* batch_size) {
    where_ = where;
    for (auto&& [k, node] : t) {
      const std::string key(k.str());
      if (key == "resolution") {
        const toml::array* a = node.as_array();
        if (!a || a->size() != 2 || !(*a)[0].is_integer() || !(*a)[1].is_integer())
          fail(key, "must be [width, height], two integers");
        e.width = positive(key, (*a)[0].as_integer()->get());
        e.height = positive(key, (*a)[1].as_integer()->get());
      } else if (key == "target_frames") {
        const toml::array* a = node.as_array();
        if (a && a->size() != 1) fail(key, "lists ", a->size(), " lengths; megaslide trains on one clip length");
        e.target_frames = integer(key, a ? (*a)[0] : node);
      } else if (key == "frame_extraction") {
        e.frame_extraction = string(key, node);
        if (e.frame_extraction != "head" && e.frame_extraction != "uniform" && e.frame_extraction != "slide")
          fail(key, "is ", quote_text(e.frame_extraction), "; use head, uniform or slide");
      } else if (key == "caption_extension") {
        e.caption_extension = string(key, node);
      } else if (key == "frame_stride") {
        e.frame_stride = integer(key, node);
      } else if (key == "frame_sample") {
        e.frame_sample = integer(key, node);
      } else if (key == "num_repeats") {
        e.num_repeats = integer(key, node);
      } else if (key == "batch_size" && general) {
        *batch_size = integer(key, node);
      } else if (!general && key == "video_directory") {
        e.video_directory = file_path(key, node);
      } else if (!general && key == "video_jsonl_file") {
        e.video_jsonl_file = file_path(key, node);
      } else if (!general && key == "cache_directory") {
        e.cache_directory = file_path(key, node);
      } else if (key == "batch_size" || kUnsupported.count(key)) {
        log_warn(path_, ": ", where_, " key ", quote_text(key), " is not supported by megaslide and is ignored",
                 key == "batch_size" ? " (set batch_size in [general])" : "");
      } else {
        log_warn(path_, ": ", where_, " has unknown key ", quote_text(key), " (ignored; see docs/data.md)");
      }
    }
  }

  [[noreturn]] void fail_file(const std::string& msg) const { MS_FAIL("dataset file '", path_, "': ", msg); }

 private:
  template <class... A>
  [[noreturn]] void fail(const std::string& key, const A&... a) const {
    MS_FAIL("dataset file '", path_, "': ", where_, " key ", quote_text(key), " ", a...);
  }

  int64_t positive(const std::string& key, int64_t v) const {
    if (v < 1 || v > (int64_t(1) << 20)) fail(key, "is ", v, "; it must be between 1 and ", int64_t(1) << 20);
    return v;
  }
  int64_t integer(const std::string& key, const toml::node& n) const {
    if (!n.is_integer()) fail(key, "must be an integer, got ", type_name(n));
    return positive(key, n.as_integer()->get());
  }
  std::string string(const std::string& key, const toml::node& n) const {
    if (!n.is_string()) fail(key, "must be a string, got ", type_name(n));
    return n.as_string()->get();
  }
  std::string file_path(const std::string& key, const toml::node& n) const {
    const fs::path p = string(key, n);
    if (p.empty()) fail(key, "is empty");
    return (p.is_absolute() ? p : base_ / p).lexically_normal().string();
  }

  std::string path_;
  fs::path base_;
  std::string where_;
};

}  // namespace

DatasetFile parse_dataset_toml(const std::string& text, const std::string& path) {
  Reader r(path);
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    r.fail_file(cat("line ", e.source().begin.line, ": ", escape_text(e.description())));
  }
  DatasetFile out;
  out.path = path;
  DatasetEntry general;
  for (auto&& [k, node] : root)
    if (k.str() != "general" && k.str() != "datasets")
      log_warn(path, ": unknown top-level key ", quote_text(k.str()), " (ignored; expected [general] and [[datasets]])");
  if (const toml::node* g = root.get("general")) {
    if (!g->is_table()) r.fail_file(cat("'general' must be a table, got ", type_name(*g)));
    r.apply(*g->as_table(), "[general]", true, general, &out.batch_size);
  }
  const toml::node* ds = root.get("datasets");
  if (!ds || !ds->is_array_of_tables() || ds->as_array()->empty())
    r.fail_file("has no [[datasets]] entries; add one with video_directory, video_jsonl_file or cache_directory");
  int64_t i = 0;
  for (const toml::node& n : *ds->as_array()) {
    const std::string where = cat("[[datasets]] #", ++i);
    DatasetEntry e = general;
    r.apply(*n.as_table(), where, false, e, nullptr);
    if (e.video_directory.empty() && e.video_jsonl_file.empty() && e.cache_directory.empty())
      r.fail_file(cat(where, " names no data; give video_directory, video_jsonl_file or cache_directory"));
    if (!e.video_directory.empty() && !e.video_jsonl_file.empty())
      r.fail_file(cat(where, " gives both video_directory and video_jsonl_file; use one per entry"));
    out.datasets.push_back(std::move(e));
  }
  return out;
}

DatasetFile read_dataset_toml(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) MS_FAIL("dataset file '", path, "' does not exist or is not a file");
  return parse_dataset_toml(read_file(path), path);
}

}  // namespace ms
