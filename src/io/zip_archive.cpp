#include "io/zip_archive.h"

#include <algorithm>
#include <limits>

#include "core/check.h"
#include "core/text.h"

namespace ms {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50, kLocator64Sig = 0x07064b50;
constexpr size_t kEndBytes = 22, kLocator64Bytes = 20, kEnd64Bytes = 56, kCentralBytes = 46, kLocalBytes = 30;
constexpr uint32_t kMax32 = 0xffffffffu;

uint64_t load_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

// Bounds-checked little-endian reads from the mapping: every read names what it was after, so a truncated or
// inconsistent file gives a message, never an out-of-bounds access.
struct Reader {
  const std::string& path;
  const uint8_t* base;
  uint64_t size;

  [[noreturn]] void fail(const std::string& problem) const {
    MS_FAIL(path, ": ", problem, "; the file is truncated or corrupt, or not a PyTorch zip checkpoint");
  }
  void need(uint64_t at, uint64_t bytes, const char* what) const {
    if (at > size || bytes > size - at) fail(cat(what, " at byte ", at, " runs past the end of the file (", size, " bytes)"));
  }
  uint64_t le(uint64_t at, int bytes, const char* what) const {
    need(at, uint64_t(bytes), what);
    return load_le(base + at, bytes);
  }
};

struct Directory {
  uint64_t entries, offset, bytes;  // central directory: entry count, start, length
  uint64_t end;                     // where the records after the central directory begin
};

// The end-of-central-directory record (the last one whose comment reaches the end of the file), with the ZIP64
// records when a locator precedes it.
Directory find_directory(const Reader& r) {
  if (r.size < kEndBytes) r.fail(cat("the file is ", r.size, " bytes, shorter than a zip end record"));
  const uint64_t lowest = r.size - kEndBytes > 65535 ? r.size - kEndBytes - 65535 : 0;
  uint64_t at = r.size - kEndBytes + 1;
  bool found = false;
  while (at-- > lowest)
    if (load_le(r.base + at, 4) == kEndSig && at + kEndBytes + load_le(r.base + at + 20, 2) == r.size) {
      found = true;
      break;
    }
  if (!found) r.fail("no zip end-of-central-directory record");
  if (load_le(r.base + at + 4, 2) != 0 || load_le(r.base + at + 6, 2) != 0)
    MS_FAIL(r.path, ": a multi-disk (split) zip archive; join it into one file");
  Directory d{load_le(r.base + at + 10, 2), load_le(r.base + at + 16, 4), load_le(r.base + at + 12, 4), at};
  if (at >= kLocator64Bytes && load_le(r.base + at - kLocator64Bytes, 4) == kLocator64Sig) {
    const uint64_t loc = at - kLocator64Bytes, end64 = r.le(loc + 8, 8, "the ZIP64 end record offset");
    if (r.le(loc + 4, 4, "the ZIP64 locator") != 0 || r.le(loc + 16, 4, "the ZIP64 locator") > 1)
      MS_FAIL(r.path, ": a multi-disk (split) zip archive; join it into one file");
    if (end64 > loc || loc - end64 < kEnd64Bytes) r.fail("the ZIP64 end record is not before its locator");
    if (r.le(end64, 4, "the ZIP64 end record") != kEnd64Sig) r.fail("the ZIP64 locator points at no ZIP64 end record");
    if (r.le(end64 + 16, 4, "the ZIP64 end record") != 0 || r.le(end64 + 20, 4, "the ZIP64 end record") != 0)
      MS_FAIL(r.path, ": a multi-disk (split) zip archive; join it into one file");
    d = Directory{r.le(end64 + 32, 8, "the ZIP64 end record"), r.le(end64 + 48, 8, "the ZIP64 end record"),
                  r.le(end64 + 40, 8, "the ZIP64 end record"), end64};
  }
  if (d.offset > d.end || d.bytes > d.end - d.offset)
    r.fail(cat("the central directory (", d.bytes, " bytes at byte ", d.offset, ") runs past its end record"));
  if (d.entries > d.bytes / kCentralBytes)
    r.fail(cat("the end record counts ", d.entries, " entries, more than the central directory's ", d.bytes,
               " bytes can hold"));
  return d;
}

struct Located {
  ZipEntry entry;
  uint64_t header;  // offset of the local header
  uint64_t begin;   // offset of the data
};

// One central-directory entry at `at`; returns the offset of the next one.
uint64_t read_central(const Reader& r, uint64_t at, uint64_t directory_end, Located* out) {
  if (at + kCentralBytes > directory_end || r.le(at, 4, "a central-directory entry") != kCentralSig)
    r.fail(cat("no central-directory entry at byte ", at));
  const uint64_t flags = r.le(at + 8, 2, "flags"), method = r.le(at + 10, 2, "method");
  uint64_t csize = r.le(at + 20, 4, "size"), usize = r.le(at + 24, 4, "size"), header = r.le(at + 42, 4, "offset");
  uint64_t disk = r.le(at + 34, 2, "disk");
  const uint64_t name_len = r.le(at + 28, 2, "name"), extra_len = r.le(at + 30, 2, "extra"),
                 comment_len = r.le(at + 32, 2, "comment");
  const uint64_t next = at + kCentralBytes + name_len + extra_len + comment_len;
  if (next > directory_end) r.fail(cat("the central-directory entry at byte ", at, " runs past the directory"));
  const std::string name(reinterpret_cast<const char*>(r.base + at + kCentralBytes), name_len);
  const std::string entry = "entry " + quote_text(name);
  if (flags & 1) MS_FAIL(r.path, ": ", entry, " is encrypted; megaslide reads only unencrypted checkpoints");
  if (method != 0)
    MS_FAIL(r.path, ": ", entry, " is compressed (zip method ", method,
            "); torch.save stores entries uncompressed: load the file in PyTorch and save it again with torch.save");

  // The ZIP64 extra field holds, in this order, each of the sizes and the offset whose 32-bit field is all ones
  // (8 bytes each), then the disk number when its 16-bit field is all ones (4 bytes).
  for (uint64_t x = at + kCentralBytes + name_len, xend = x + extra_len; x + 4 <= xend;) {
    const uint64_t id = load_le(r.base + x, 2), len = load_le(r.base + x + 2, 2);
    if (x + 4 + len > xend) r.fail(cat(entry, " has an extra field running past its entry"));
    if (id == 1) {
      uint64_t p = x + 4;
      auto zip64 = [&](uint64_t* field, uint64_t all_ones, uint64_t bytes) {
        if (*field != all_ones) return;
        if (p + bytes > x + 4 + len) r.fail(cat(entry, " lacks a ZIP64 field its header promises"));
        *field = load_le(r.base + p, int(bytes));
        p += bytes;
      };
      zip64(&usize, kMax32, 8);
      zip64(&csize, kMax32, 8);
      zip64(&header, kMax32, 8);
      zip64(&disk, 0xffff, 4);
    }
    x += 4 + len;
  }
  if (disk != 0) MS_FAIL(r.path, ": a multi-disk (split) zip archive; join it into one file");
  if (csize != usize) r.fail(cat(entry, " is stored with ", csize, " bytes for ", usize, " bytes of content"));

  // The local header must repeat the name; the data follows its own name and extra field.
  if (r.le(header, 4, "a local header") != kLocalSig) r.fail(cat(entry, " points at no local header (byte ", header, ")"));
  r.need(header, kLocalBytes, "a local header");
  const uint64_t local_name = load_le(r.base + header + 26, 2), local_extra = load_le(r.base + header + 28, 2);
  r.need(header + kLocalBytes, local_name + local_extra, "a local header");
  if (local_name != name_len || !std::equal(name.begin(), name.end(), r.base + header + kLocalBytes))
    r.fail(cat(entry, ": its local header names another entry"));
  if (load_le(r.base + header + 6, 2) & 1)
    MS_FAIL(r.path, ": ", entry, " is encrypted; megaslide reads only unencrypted checkpoints");
  const uint64_t begin = header + kLocalBytes + local_name + local_extra;
  if (usize > uint64_t(std::numeric_limits<int64_t>::max()) || begin > r.size || usize > r.size - begin)
    r.fail(cat(entry, " (", usize, " bytes at byte ", begin, ") runs past the end of the file"));
  out->entry = ZipEntry{name, r.base + begin, int64_t(usize)};
  out->header = header;
  out->begin = begin;
  return next;
}

}  // namespace

bool ZipArchive::starts_like_zip(const uint8_t* p, size_t n) { return n >= 4 && load_le(p, 4) == kLocalSig; }

ZipArchive ZipArchive::open(const std::string& path, MappedFile file) {
  ZipArchive z;
  z.path_ = path;
  z.map_ = std::move(file);
  const Reader r{path, z.map_.data(), z.map_.size()};
  const Directory d = find_directory(r);

  std::vector<Located> located;  // grows with the entries that parse, never with the end record's count alone
  uint64_t at = d.offset;
  for (uint64_t i = 0; i < d.entries; ++i) at = read_central(r, at, d.offset + d.bytes, &located.emplace_back());

  // Entries (local header + data) lie before the central directory and never overlap.
  std::vector<const Located*> by_offset;
  for (const Located& l : located) by_offset.push_back(&l);
  std::sort(by_offset.begin(), by_offset.end(), [](const Located* a, const Located* b) { return a->header < b->header; });
  for (size_t i = 0; i < by_offset.size(); ++i) {
    const Located& l = *by_offset[i];
    const uint64_t end = l.begin + uint64_t(l.entry.size), limit = i + 1 < by_offset.size() ? by_offset[i + 1]->header : d.offset;
    if (end > limit)
      r.fail(cat("entry ", quote_text(l.entry.name), " (bytes ", l.header, " to ", end, ") overlaps ",
                 i + 1 < by_offset.size() ? "entry " + quote_text(by_offset[i + 1]->entry.name) : std::string("the central directory")));
  }
  for (Located& l : located) {
    if (!z.index_.emplace(l.entry.name, z.entries_.size()).second)
      r.fail(cat("entry ", quote_text(l.entry.name), " appears twice"));
    z.entries_.push_back(std::move(l.entry));
  }
  return z;
}

const ZipEntry* ZipArchive::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

}  // namespace ms
