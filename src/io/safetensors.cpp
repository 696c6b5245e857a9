#include "io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/check.h"
#include "core/text.h"

namespace ms {

namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr size_t kMaxTensors = 1'000'000;
constexpr const char* kCorrupt = "the file is corrupt or not a safetensors file";
constexpr const char* kMetadataKey = "__metadata__";

[[noreturn]] void corrupt(const std::string& path, const std::string& problem, const char* remedy = kCorrupt) {
  MS_FAIL(path, ": ", problem, "; ", remedy);
}

// numel(shape) * dtype_size(t) into *out; false on a negative dimension or int64 overflow.
bool checked_nbytes(const Shape& shape, DType t, int64_t* out) {
  int64_t n = dtype_size(t);
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return false;
  *out = n;
  return true;
}

// An integer JSON value in int64 range into *out; false for anything else.
bool get_int64(const json& v, int64_t* out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(std::numeric_limits<int64_t>::max())) return false;
    *out = int64_t(u);
    return true;
  }
  if (!v.is_number_integer()) return false;
  *out = v.get<int64_t>();
  return true;
}

uint64_t load_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

// Parses the header text. Besides JSON syntax it rejects, while parsing, what the DOM would hide
// or make expensive: duplicate keys in any object, nesting deeper than a valid header (object ->
// tensor object -> shape array), and more than kMaxTensors top-level keys. *order receives the
// top-level keys in header order.
json parse_header(const std::string& path, const char* text, size_t n, std::vector<std::string>* order) {
  std::vector<std::set<std::string>> open_keys;  // one key set per open container (empty for arrays)
  auto on_event = [&](int depth, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= 3) corrupt(path, "the header nests JSON deeper than a safetensors header can");
        open_keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        open_keys.pop_back();
        break;
      case json::parse_event_t::key: {
        const auto& key = parsed.get_ref<const std::string&>();
        if (!open_keys.back().insert(key).second)
          corrupt(path, depth == 1 ? cat("tensor name ", quote_text(key), " appears twice in the header")
                                   : cat("key ", quote_text(key), " appears twice in one header object"));
        if (depth == 1) {
          order->push_back(key);
          if (order->size() > kMaxTensors + 1)
            corrupt(path, cat("the header lists more than ", kMaxTensors, " tensors"));
        }
        break;
      }
      case json::parse_event_t::value:
        break;
    }
    return true;
  };
  try {
    return json::parse(text, text + n, on_event);
  } catch (const json::exception& e) {
    corrupt(path, cat("the header is not valid JSON (", escape_text(e.what()), ")"));
  }
}

struct Placed {
  TensorEntry entry;
  int64_t begin, end;  // offsets in the data section
};

Placed parse_entry(const std::string& path, const std::string& name, const json& v, int64_t data_bytes) {
  const std::string t = "tensor " + quote_text(name);
  if (!v.is_object())
    corrupt(path, cat(t, " is a JSON ", v.type_name(), ", not an object with dtype, shape and data_offsets"));
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!v.contains(key)) corrupt(path, cat(t, " has no \"", key, "\""));

  Placed p{};
  p.entry.name = name;
  const json& dtype = v.at("dtype");
  if (!dtype.is_string()) corrupt(path, cat(t, " dtype is not a string"));
  if (!dtype_from_name(dtype.get_ref<const std::string&>(), &p.entry.dtype))
    corrupt(
        path, cat(t, " has unknown dtype ", quote_text(dtype.get_ref<const std::string&>())),
        "supported dtypes are F32, F64, F16, BF16, F8_E4M3, F8_E5M2, I64, I32, U8: convert the tensor to one of them");

  const json& shape = v.at("shape");
  if (!shape.is_array()) corrupt(path, cat(t, " shape is not an array of integers"));
  for (const json& d : shape) {
    int64_t dim;
    if (!get_int64(d, &dim)) {
      if (d.is_number_unsigned())
        corrupt(path, cat(t, " shape has too many elements (", d.dump(), " in one dimension)"));
      corrupt(path, cat(t, " shape is not an array of integers"));
    }
    if (dim < 0) corrupt(path, cat(t, " has negative dimension ", dim, " in its shape"));
    p.entry.shape.push_back(dim);
  }
  if (!checked_nbytes(p.entry.shape, p.entry.dtype, &p.entry.nbytes))
    corrupt(path,
            cat(t, " shape ", shape_str(p.entry.shape), " has too many elements (its byte size overflows int64)"));

  const json& offsets = v.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !get_int64(offsets[0], &p.begin) ||
      !get_int64(offsets[1], &p.end) || p.begin < 0 || p.end < 0)
    corrupt(path, cat(t, " data_offsets is not an array of two non-negative integers"));
  const std::string range = cat("[", p.begin, ", ", p.end, "]");
  if (p.begin > p.end) corrupt(path, cat(t, " data_offsets ", range, " begin after they end"));
  if (p.end > data_bytes)
    corrupt(path, cat(t, " data_offsets ", range, " run past the end of the data section (", data_bytes, " bytes)"));
  if (p.end - p.begin != p.entry.nbytes)
    corrupt(path, cat(t, " data_offsets ", range, " do not match dtype ", dtype_name(p.entry.dtype), " x shape ",
                      shape_str(p.entry.shape), " (", p.entry.nbytes, " bytes)"));
  return p;
}

// Validates the mapped file (size bytes at base) and fills entries (sorted by offset) and metadata.
void parse_file(const std::string& path, const uint8_t* base, size_t size, std::vector<TensorEntry>* entries,
                std::map<std::string, std::string>* metadata) {
  if (size < 8) corrupt(path, cat("the file is ", size, " bytes, shorter than the 8-byte header length field"));
  const uint64_t header_bytes = load_u64_le(base);
  if (header_bytes > kMaxHeaderBytes)
    corrupt(path, cat("header length ", header_bytes, " exceeds the limit of ", kMaxHeaderBytes, " bytes"));
  if (header_bytes > size - 8)
    corrupt(path, cat("header length ", header_bytes, " runs past the end of the file (", size, " bytes)"));
  const int64_t data_bytes = int64_t(size - 8 - header_bytes);
  const uint8_t* data = base + 8 + header_bytes;

  std::vector<std::string> order;
  const json header = parse_header(path, reinterpret_cast<const char*>(base + 8), header_bytes, &order);
  if (!header.is_object()) corrupt(path, cat("the header is a JSON ", header.type_name(), ", not an object"));

  std::vector<Placed> placed;
  for (const std::string& name : order) {
    const json& v = header.at(name);
    if (name != kMetadataKey) {
      placed.push_back(parse_entry(path, name, v, data_bytes));
      continue;
    }
    if (!v.is_object()) corrupt(path, "__metadata__ is not an object of string -> string");
    for (const auto& [k, s] : v.items()) {
      if (!s.is_string())
        corrupt(path, cat("__metadata__ value for ", quote_text(k), " is a ", s.type_name(), ", not a string"));
      (*metadata)[k] = s.get<std::string>();
    }
  }
  if (placed.size() > kMaxTensors) corrupt(path, cat("the header lists more than ", kMaxTensors, " tensors"));

  // The tensors must tile the data section: sorted by offset, each starts where the previous ended.
  std::stable_sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  int64_t expected = 0;
  std::string previous;
  for (const Placed& p : placed) {
    if (p.begin != expected)
      corrupt(path, cat("tensor ", quote_text(p.entry.name), " begins at byte ", p.begin, " of the data section but ",
                        previous.empty() ? std::string("the data section starts at byte 0")
                                         : cat("the previous tensor ", previous, " ends at byte ", expected),
                        "; tensors must tile the data section without gaps or overlaps"));
    expected = p.end;
    previous = quote_text(p.entry.name);
  }
  if (expected != data_bytes)
    corrupt(path, cat("the tensors end at byte ", expected, " but the data section has ", data_bytes,
                      " bytes (file size ", size, " - 8 - header length ", header_bytes, ")"));

  entries->reserve(placed.size());
  for (Placed& p : placed) {
    p.entry.data = data + p.begin;
    entries->push_back(std::move(p.entry));
  }
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void write_failed(const std::string& path, const std::string& step, int err) {
  MS_FAIL(path, ": cannot write (", step, ": ", std::strerror(err),
          "); check that the directory exists, is writable and has free space");
}

// The header text (space-padded to a multiple of 8 bytes) for tensors written in order.
std::string make_header(const std::string& path, const std::vector<TensorRef>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  int64_t offset = 0;
  for (const TensorRef& t : tensors) {
    int64_t nbytes;
    if (t.name == kMetadataKey) MS_FAIL(path, ": cannot write a tensor named __metadata__; rename it");
    if (header.contains(t.name))
      MS_FAIL(path, ": tensor name ", quote_text(t.name), " is given twice; names must be unique");
    if (!checked_nbytes(t.shape, t.dtype, &nbytes) || __builtin_add_overflow(offset, nbytes, &offset))
      MS_FAIL(path, ": tensor ", quote_text(t.name), " has an invalid shape ", shape_str(t.shape),
              " (negative dimension or byte size overflow)");
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset - nbytes, offset}}};
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception&) {
    MS_FAIL(path, ": a tensor name or metadata string is not valid UTF-8; safetensors headers must be UTF-8");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > kMaxHeaderBytes)
    MS_FAIL(path, ": the header would exceed ", kMaxHeaderBytes, " bytes; write fewer tensors per file");
  return text;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  f.map_ = MappedFile::open(path, "a .safetensors file");
  parse_file(path, f.map_.data(), f.map_.size(), &f.entries_, &f.metadata_);
  for (size_t i = 0; i < f.entries_.size(); ++i) f.index_.emplace(f.entries_[i].name, i);
  return f;
}

const TensorEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_safetensors(path, tensors, metadata, [&](size_t k, std::vector<uint8_t>&) { return tensors[k].data; });
}

void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata, const TensorBytes& bytes) {
  SafetensorsWriter w(path, tensors, metadata);
  std::vector<uint8_t> scratch;
  int64_t at = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const size_t n = size_t(numel(tensors[k].shape) * dtype_size(tensors[k].dtype));
    if (n == 0) continue;
    const void* p = bytes(k, scratch);
    if (!p) MS_FAIL(path, ": tensor ", quote_text(tensors[k].name), " has ", n, " bytes but no data");
    w.write_at(at, p, n);
    at += int64_t(n);
  }
  w.commit();
}

SafetensorsWriter::SafetensorsWriter(std::string path, const std::vector<TensorRef>& tensors,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)), tmp_(cat(path_, ".tmp-", ::getpid())) {
  const std::string header = make_header(path_, tensors, metadata);
  for (const TensorRef& t : tensors) data_bytes_ += numel(t.shape) * dtype_size(t.dtype);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) write_failed(path_, "create temp file", errno);
  put(0, length, 8);
  put(8, header.data(), header.size());
  data_start_ = 8 + int64_t(header.size());
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void SafetensorsWriter::write_at(int64_t at, const void* bytes, size_t n) {
  MS_CHECK(at >= 0 && at + int64_t(n) <= data_bytes_, path_, ": a write outside the tensors' bytes");
  put(data_start_ + at, bytes, n);
}

void SafetensorsWriter::put(int64_t at, const void* bytes, size_t n) {
  const char* p = static_cast<const char*>(bytes);
  off_t pos = off_t(at);
  while (n > 0) {
    const ssize_t k = ::pwrite(fd_, p, std::min(n, size_t(1) << 30), pos);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) write_failed(path_, "write", errno);
    p += k, pos += k;
    n -= size_t(k);
  }
}

void SafetensorsWriter::commit() {
  if (::fsync(fd_) != 0) write_failed(path_, "fsync", errno);
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) write_failed(path_, "close", errno);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) write_failed(path_, "rename temp file over it", errno);
  committed_ = true;
  const std::string dir = std::filesystem::path(path_).parent_path().string();
  Fd dfd{::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (dfd.fd < 0 || ::fsync(dfd.fd) != 0)
    MS_FAIL(path_, ": written, but syncing its directory failed (", std::strerror(errno),
            "); the new file may not survive a crash");
}

}  // namespace ms
