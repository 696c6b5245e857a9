#include "io/pth.h"

#include <cstring>
#include <fstream>

#include "core/check.h"
#include "core/text.h"
#include "io/pickle.h"

namespace ms {

namespace {

using pickle::Kind;
using pickle::Value;

constexpr int64_t kMaxPickleBytes = int64_t(64) << 20;  // state-dict pickles are KB to a few MB
constexpr size_t kMaxKey = 1024, kMaxName = 4096;      // a dict key, and a flattened name

constexpr const char* kResave =
    "load it in PyTorch and save the state dict again with torch.save (the zip format, PyTorch 1.6 and later)";

// Wrapping keys tried, in this order, when a checkpoint holds its tensors under more than one of its keys.
constexpr const char* kWrappers[] = {"state_dict", "model", "module"};

// The tensors below a value, named by their path of dict keys and list indices joined with ".". Work is bounded by
// `budget` visits, so a pickle whose shared sublists make its tree exponentially larger than the stream is refused.
class Flattener {
 public:
  Flattener(const std::string& source, int64_t budget) : source_(source), budget_(budget) {}

  void walk(const Value& v, const std::string& name) {
    if (--budget_ < 0)
      MS_FAIL(source_, ": the pickle's containers share items so often that walking them would not end; the file is "
                       "not a plain state dict");
    if (v.kind == Kind::tensor) {
      if (name.empty()) MS_FAIL(source_, ": the pickle holds a single tensor, not a dict of named tensors");
      found.emplace_back(name, v.tensor);
      return;
    }
    const bool dict = v.kind == Kind::dict;
    if (!dict && v.kind != Kind::list && v.kind != Kind::tuple) return;  // numbers, strings, None: not weights
    const size_t step = dict ? 2 : 1;
    for (size_t i = 0; i + step - 1 < v.items.size(); i += step) {
      const std::string key = dict ? key_text(*v.items[i]) : std::to_string(i);
      if (name.size() + key.size() >= kMaxName)
        MS_FAIL(source_, ": a tensor name longer than ", kMaxName, " bytes; the file is not a plain state dict");
      walk(*v.items[i + step - 1], name.empty() ? key : name + "." + key);
    }
  }

  std::vector<std::pair<std::string, std::shared_ptr<const pickle::TensorView>>> found;

 private:
  std::string key_text(const Value& k) const {
    if (k.kind == Kind::string) {
      if (k.text.size() > kMaxKey)
        MS_FAIL(source_, ": a dict key of ", k.text.size(), " bytes, longer than a state dict's (at most ", kMaxKey,
                ")");
      return k.text;
    }
    if (k.kind == Kind::integer) return std::to_string(k.integer);
    MS_FAIL(source_, ": a dict key that is neither a string nor an integer; the file is not a plain state dict");
  }
  const std::string& source_;
  int64_t budget_;
};

bool holds_tensor(const Value& v, int64_t* budget) {
  if (--*budget < 0) return false;
  if (v.kind == Kind::tensor) return true;
  for (const auto& item : v.items)
    if (holds_tensor(*item, budget)) return true;
  return false;
}

// The value whose tensors are the state dict: the root, or the one dict below a wrapping key.
const Value& state_dict(const Value& root, const std::string& source, int64_t budget) {
  if (root.kind != Kind::dict) MS_FAIL(source, ": the pickle holds no dict of tensors; save a state dict");
  std::vector<std::pair<std::string, const Value*>> wrapped;  // keys whose dict values hold tensors
  for (size_t i = 0; i + 1 < root.items.size(); i += 2) {
    const Value& v = *root.items[i + 1];
    if (v.kind == Kind::tensor) return root;
    if (v.kind == Kind::dict && root.items[i]->kind == Kind::string && holds_tensor(v, &budget))
      wrapped.emplace_back(root.items[i]->text, &v);
  }
  if (wrapped.size() == 1) return *wrapped[0].second;
  for (const char* key : kWrappers)
    for (const auto& [name, v] : wrapped)
      if (name == key) return *v;
  if (wrapped.empty()) return root;  // tensors in lists, or none at all: the walk says which
  std::string keys;
  for (const auto& [name, v] : wrapped) keys += (keys.empty() ? "" : ", ") + quote_text(name);
  MS_FAIL(source, ": tensors under several keys (", keys, ") and none is state_dict, model or module; save the model's "
          "state dict alone with torch.save(model.state_dict(), path)");
}

// The archive's folder: the directory of its one data.pkl.
std::string folder_of(const ZipArchive& z) {
  std::string folder;
  int found = 0;
  for (const ZipEntry& e : z.entries()) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      folder = e.name.substr(0, slash);
      ++found;
    }
  }
  if (found == 0) MS_FAIL(z.path(), ": a zip archive with no <folder>/data.pkl, so not a torch.save checkpoint; ", kResave);
  if (found > 1) MS_FAIL(z.path(), ": a zip archive with ", found, " data.pkl entries; a torch.save checkpoint has one");
  return folder;
}

// Whether a view with this shape and stride is its elements in row-major order (shapes are checked by the unpickler
// not to overflow, so the running product cannot).
bool row_major(const Shape& shape, const Shape& stride) {
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && stride[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

// Copies the strided view at `base` (elements of `size` bytes) into dst, row-major.
void gather(const uint8_t* base, const Shape& shape, const Shape& stride, int64_t size, uint8_t* dst) {
  const int64_t n = numel(shape);
  Shape index(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t at = 0;
    for (size_t i = 0; i < shape.size(); ++i) at += index[i] * stride[i];
    std::memcpy(dst + k * size, base + at * size, size_t(size));
    for (size_t i = shape.size(); i-- > 0;) {  // next index, last axis fastest
      if (++index[i] < shape[i]) break;
      index[i] = 0;
    }
  }
}

}  // namespace

bool PthFile::is_pth(const std::string& path) {
  if (path.ends_with(".pth") || path.ends_with(".pt")) return true;
  std::ifstream in(path, std::ios::binary);
  char head[4] = {};
  in.read(head, 4);
  return ZipArchive::starts_like_zip(reinterpret_cast<const uint8_t*>(head), size_t(in.gcount()));
}

PthFile PthFile::open(const std::string& path) {
  MappedFile map = MappedFile::open(path, "a PyTorch .pth/.pt file");
  if (!ZipArchive::starts_like_zip(map.data(), map.size())) {
    if (map.size() >= 2 && map.data()[0] == 0x80)  // a pickle's PROTO opcode
      MS_FAIL(path, ": a legacy (pre-1.6, non-zip) PyTorch checkpoint, which megaslide does not read; ", kResave);
    MS_FAIL(path, ": not a PyTorch checkpoint (it does not start like a zip archive); pass a file written by torch.save");
  }
  const int64_t file_bytes = int64_t(map.size());
  PthFile f;
  f.archive_ = ZipArchive::open(path, std::move(map));
  const std::string folder = folder_of(f.archive_);
  if (const ZipEntry* order = f.archive_.find(folder + "/byteorder")) {
    const std::string text(reinterpret_cast<const char*>(order->data), size_t(std::min<int64_t>(order->size, 16)));
    if (text != "little")
      MS_FAIL(path, ": byte order ", quote_text(text), "; megaslide reads little-endian checkpoints only: ", kResave);
  }
  const ZipEntry* pkl = f.archive_.find(folder + "/data.pkl");
  const std::string source = cat(path, ": ", escape_text(pkl->name));
  if (pkl->size > kMaxPickleBytes)
    MS_FAIL(source, ": a pickle of ", pkl->size, " bytes, more than a state dict needs (at most ", kMaxPickleBytes,
            "); the file is not a plain state dict");
  const pickle::ValuePtr root = pickle::load(pkl->data, size_t(pkl->size), source);

  const int64_t budget = pkl->size + 1024;  // every placed item cost at least a byte of the stream
  Flattener walk(source, budget);
  walk.walk(state_dict(*root, source, budget), "");
  if (walk.found.empty()) MS_FAIL(source, ": the checkpoint holds no tensors");

  std::map<std::string, const pickle::StorageRef*> storages;  // key -> its first reference, for consistency
  int64_t copied = 0;  // bytes of strided views copied so far: together at most the file's size
  for (auto& [name, view] : walk.found) {
    const pickle::StorageRef& s = *view->storage;
    auto [it, fresh] = storages.emplace(s.key, &s);
    if (!fresh && (it->second->dtype != s.dtype || it->second->numel != s.numel || it->second->untyped != s.untyped))
      MS_FAIL(source, ": storage ", quote_text(s.key), " is described twice with different types or sizes");
    const ZipEntry* data = f.archive_.find(folder + "/data/" + s.key);
    if (!data)
      MS_FAIL(path, ": tensor ", quote_text(name), " uses storage ", quote_text(s.key), ", which the archive lacks; ",
              "the file is truncated or corrupt");
    const int64_t esize = dtype_size(view->dtype), unit = s.untyped ? 1 : dtype_size(s.dtype);
    int64_t storage_bytes;
    if (__builtin_mul_overflow(s.numel, unit, &storage_bytes) || storage_bytes != data->size)
      MS_FAIL(path, ": storage ", quote_text(s.key), " should hold ", s.numel, s.untyped ? " bytes" : " elements of ",
              s.untyped ? "" : dtype_name(s.dtype), " but its entry has ", data->size,
              " bytes; the file is truncated or corrupt");
    TensorEntry e{name, view->dtype, view->shape, data->data + view->offset * esize, numel(view->shape) * esize};
    if (!row_major(view->shape, view->stride)) {  // a strided view: copy it
      if ((copied += e.nbytes) > file_bytes)
        MS_FAIL(path, ": tensor ", quote_text(name), " is a strided view, and copying the strided views would take ",
                "more memory than the file's size (views repeat elements); call .contiguous() on the tensors ",
                "before saving");
      f.copies_.emplace_back(new uint8_t[size_t(std::max<int64_t>(e.nbytes, 1))]);
      gather(e.data, view->shape, view->stride, esize, f.copies_.back().get());
      e.data = f.copies_.back().get();
    }
    if (!f.index_.emplace(name, f.entries_.size()).second)
      MS_FAIL(source, ": tensor name ", quote_text(name), " appears twice after flattening nested dicts");
    f.entries_.push_back(std::move(e));
  }
  return f;
}

const TensorEntry* PthFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

}  // namespace ms
