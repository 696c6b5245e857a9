// A whole file mapped read-only into memory; movable, not copyable; unmaps on destruction.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ms {

class MappedFile {
 public:
  // Opens and maps path; throws ms::Error naming path and the problem (missing, not a regular file, unreadable).
  // `kind` names what the path should be, for the message ("a .safetensors file").
  static MappedFile open(const std::string& path, const char* kind);

  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return static_cast<const uint8_t*>(map_); }  // null when the file is empty
  size_t size() const { return size_; }

 private:
  void* map_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ms
