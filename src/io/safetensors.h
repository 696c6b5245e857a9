// Safetensors files: a strict, mmap'ed reader and an atomic writer.
//
// Layout: u64 little-endian header length N, N bytes of JSON header, then the data section.
// The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the data section) plus an optional "__metadata__" object of string -> string.
// The reader accepts only files whose tensors tile the data section exactly (docs/formats.md) and
// reports every violation as an ms::Error naming the file; no byte sequence makes it crash.
// (A file truncated by another process while mapped can still raise SIGBUS on access.)
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "io/mapped_file.h"
#include "io/tensor_entry.h"

namespace ms {

// A tensor to write; data holds numel(shape) * dtype_size(dtype) bytes (may be null when empty).
struct TensorRef {
  std::string name;
  DType dtype;
  Shape shape;
  const void* data;
};

// A read-only, memory-mapped safetensors file; movable, not copyable.
// Entry pointers and data stay valid across moves.
class SafetensorsFile {
 public:
  // Opens, maps and validates path; throws ms::Error naming path and the problem.
  static SafetensorsFile open(const std::string& path);

  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;

  const std::string& path() const { return path_; }
  // Sorted by data offset (header order among zero-size tensors that share an offset).
  const std::vector<TensorEntry>& entries() const { return entries_; }
  const TensorEntry* find(const std::string& name) const;  // null if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;

  std::string path_;
  MappedFile map_;
  std::vector<TensorEntry> entries_;
  std::map<std::string, size_t> index_;  // name -> position in entries_
  std::map<std::string, std::string> metadata_;
};

// Writes tensors (in the given order, contiguous offsets, header space-padded to a multiple of 8)
// atomically: to "<path>.tmp-<pid>", fsync, rename over path, fsync the directory. On failure
// throws ms::Error naming the path and the errno text, removes the temp file and leaves any
// existing file at path untouched. Names must be unique and not "__metadata__".
void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Tensor k's bytes for a write: tensors[k].data, or bytes made into `scratch` (a conversion) and returned.
using TensorBytes = std::function<const void*(size_t k, std::vector<uint8_t>& scratch)>;

// write_safetensors with tensor k's bytes from bytes(k, scratch), called once per non-empty tensor in order, so that
// a caller converting its tensors holds one at a time (the tensors' data pointers are not read).
void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata, const TensorBytes& bytes);

// A safetensors file whose tensor bytes are placed in any order, for data that arrives in pieces (a model gathered
// from the ranks of a distributed run): the header is written from the tensors' names, dtypes and shapes (their data
// pointers are not read), the bytes by write_at, and commit() makes it as atomic as write_safetensors (a temporary
// beside path, fsynced and renamed over it). Destroyed uncommitted, it removes the temporary. Throws ms::Error as
// write_safetensors does.
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::string path, const std::vector<TensorRef>& tensors,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  // n bytes at byte `at` of the data (the tensors back to back in the order given).
  void write_at(int64_t at, const void* bytes, size_t n);
  void commit();

 private:
  void put(int64_t at, const void* bytes, size_t n);  // at: from the file's start
  std::string path_, tmp_;
  int fd_ = -1;
  int64_t data_start_ = 0, data_bytes_ = 0;
  bool committed_ = false;
};

}  // namespace ms
