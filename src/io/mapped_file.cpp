#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/check.h"

namespace ms {

MappedFile MappedFile::open(const std::string& path, const char* kind) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) MS_FAIL(path, ": cannot open (", std::strerror(errno), "); check the path and its permissions");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) MS_FAIL(path, ": cannot stat (", std::strerror(errno), ")");
  if (!S_ISREG(st.st_mode)) MS_FAIL(path, ": not a regular file; pass the path of ", kind);
  MappedFile f;
  if (st.st_size > 0) {  // mmap cannot map zero bytes
    void* m = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) MS_FAIL(path, ": cannot map the file (", std::strerror(errno), ")");
    f.map_ = m;
    f.size_ = size_t(st.st_size);
  }
  return f;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : map_(std::exchange(o.map_, nullptr)), size_(std::exchange(o.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (map_) ::munmap(map_, size_);
    map_ = std::exchange(o.map_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (map_) ::munmap(map_, size_);
}

}  // namespace ms
