#include "data/dataset_toml.h"

#include <toml++/toml.h>

#include <filesystem>
#include <set>

#include "core/check.h"
#include "core/log.h"
#include "core/text.h"
#include "data/frame_extraction.h"
#include "io/atomic_file.h"

namespace fs = std::filesystem;

namespace ms {
namespace {

// musubi-tuner keys that would change the data and that megaslide does not implement: an error naming them in an
// entry read from files, nothing in one read from a cache (they only changed how the cache was made).
const std::set<std::string> kUnsupported = {"control_directory",  "fp_latent_window_size", "fp_1f_clean_indices",
                                            "fp_1f_target_index", "fp_1f_no_post",         "multiple_target"};
// musubi-tuner keys that change nothing megaslide does (warned, so nobody thinks they took effect).
const std::set<std::string> kIgnored = {"debug_dataset"};

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
  void apply(const toml::table& t, const std::string& where, bool general, DatasetEntry& e) {
    where_ = where;
    for (auto&& [k, node] : t) {
      const std::string key(k.str());
      if (key == "resolution") {
        const toml::array* a = node.as_array();
        if (node.is_integer()) {
          e.width = e.height = positive(key, node.as_integer()->get());
        } else {
          if (!a || a->size() != 2 || !(*a)[0].is_integer() || !(*a)[1].is_integer())
            fail(key, "must be [width, height], two integers, or one integer for a square");
          e.width = positive(key, (*a)[0].as_integer()->get());
          e.height = positive(key, (*a)[1].as_integer()->get());
        }
      } else if (key == "target_frames") {
        e.target_frames.clear();
        if (const toml::array* a = node.as_array()) {
          if (a->empty()) fail(key, "is an empty list; give one or more clip lengths");
          for (const toml::node& n : *a) e.target_frames.push_back(integer(key, n));
        } else {
          e.target_frames.push_back(integer(key, node));
        }
      } else if (key == "frame_extraction") {
        e.frame_extraction = string(key, node);
        if (!is_frame_extraction(e.frame_extraction))
          fail(key, "is ", quote_text(e.frame_extraction), "; use head, chunk, slide, uniform or full");
      } else if (key == "caption_extension") {
        e.caption_extension = string(key, node);
      } else if (key == "frame_stride") {
        e.frame_stride = integer(key, node);
      } else if (key == "frame_sample") {
        e.frame_sample = integer(key, node);
      } else if (key == "source_fps") {
        if (!node.is_number()) fail(key, "must be a number, got ", type_name(node));
        e.source_fps = node.value<double>().value_or(0);
        if (!(e.source_fps > 0 && e.source_fps <= 1000))
          fail(key, "is ", e.source_fps, "; give the videos' frame rate");
      } else if (key == "enable_bucket" || key == "bucket_no_upscale") {
        if (!node.is_boolean()) fail(key, "must be true or false, got ", type_name(node));
        (key == "enable_bucket" ? e.enable_bucket : e.bucket_no_upscale) = node.as_boolean()->get();
      } else if (key == "max_frames") {
        e.max_frames = integer(key, node);
      } else if (key == "num_repeats") {
        e.num_repeats = integer(key, node);
      } else if (key == "batch_size") {
        e.batch_size = integer(key, node);
      } else if (!general && key == "video_directory") {
        e.video_directory = file_path(key, node);
      } else if (!general && key == "video_jsonl_file") {
        e.video_jsonl_file = file_path(key, node);
      } else if (!general && key == "image_directory") {
        e.image_directory = file_path(key, node);
      } else if (!general && key == "image_jsonl_file") {
        e.image_jsonl_file = file_path(key, node);
      } else if (!general && key == "cache_directory") {
        e.cache_directory = file_path(key, node);
      } else if (kUnsupported.count(key)) {
        e.unsupported.push_back(cat(where_, " key ", quote_text(key)));
      } else if (kIgnored.count(key)) {
        log_warn(path_, ": ", where_, " key ", quote_text(key), " changes nothing in megaslide and is ignored");
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
      log_warn(path, ": unknown top-level key ", quote_text(k.str()),
               " (ignored; expected [general] and [[datasets]])");
  if (const toml::node* g = root.get("general")) {
    if (!g->is_table()) r.fail_file(cat("'general' must be a table, got ", type_name(*g)));
    r.apply(*g->as_table(), "[general]", true, general);
  }
  const toml::node* ds = root.get("datasets");
  if (!ds || !ds->is_array_of_tables() || ds->as_array()->empty())
    r.fail_file("has no [[datasets]] entries; add one with video_directory, image_directory or cache_directory");
  int64_t i = 0;
  for (const toml::node& n : *ds->as_array()) {
    const std::string where = cat("[[datasets]] #", ++i);
    DatasetEntry e = general;
    r.apply(*n.as_table(), where, false, e);
    const int sources = !e.video_directory.empty() + !e.video_jsonl_file.empty() + !e.image_directory.empty() +
                        !e.image_jsonl_file.empty();
    if (sources == 0 && e.cache_directory.empty() && e.unsupported.empty())
      r.fail_file(cat(where,
                      " names no data; give video_directory, video_jsonl_file, image_directory, "
                      "image_jsonl_file or cache_directory"));
    if (sources > 1)
      r.fail_file(cat(where,
                      " gives more than one of video_directory, video_jsonl_file, image_directory and "
                      "image_jsonl_file; use one per entry"));
    if (e.cache_directory.empty() && !e.unsupported.empty())
      r.fail_file(cat(e.unsupported.front(),
                      " is not implemented by megaslide for data read from files (it would change the data); "
                      "make a latent cache with musubi-tuner and give it as cache_directory, or remove the key"));
    out.datasets.push_back(std::move(e));
  }
  return out;
}

DatasetFile read_dataset_toml(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) MS_FAIL("dataset file '", path, "' does not exist or is not a file");
  return parse_dataset_toml(read_file(path), path);
}

void check_file_entry(const DatasetFile& file, const DatasetEntry& e) {
  if (e.target_frames.empty() && e.frame_extraction != "full" && !e.images())
    MS_FAIL("'", file.path, "': a [[datasets]] entry sets no target_frames; add target_frames = [N, ...]");
  if (e.width == 0 || e.height == 0)
    MS_FAIL("'", file.path, "': a [[datasets]] entry sets no resolution; add resolution = [W, H]");
}

}  // namespace ms
