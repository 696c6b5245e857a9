// A strict reader for the zip archives PyTorch writes (torch.save's default format): every entry stored
// uncompressed, ZIP64 records where offsets or sizes pass 4 GiB. Entries are views into the memory-mapped file.
//
// Refused, each with an ms::Error naming the file and the problem: a file with no end-of-central-directory
// record (not a zip, or truncated), multi-disk archives, compressed or encrypted entries, a local header that does
// not match its central-directory entry, an entry running past the central directory or overlapping another,
// and duplicate names. Nothing is read outside the file and nothing is allocated in proportion to a size field.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/mapped_file.h"

namespace ms {

struct ZipEntry {
  std::string name;
  const uint8_t* data;  // into the mapping; unaligned in general
  int64_t size;         // bytes
};

class ZipArchive {
 public:
  // Reads the archive in `file`, the mapping of `path` (named in messages).
  static ZipArchive open(const std::string& path, MappedFile file);
  // Whether n bytes at p start with a zip local-file-header signature (what torch.load checks to tell its zip
  // format from the legacy one).
  static bool starts_like_zip(const uint8_t* p, size_t n);

  const std::string& path() const { return path_; }
  const std::vector<ZipEntry>& entries() const { return entries_; }  // in central-directory order
  const ZipEntry* find(const std::string& name) const;               // null if absent

 private:
  std::string path_;
  MappedFile map_;
  std::vector<ZipEntry> entries_;
  std::map<std::string, size_t> index_;
};

}  // namespace ms
