#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.h"

namespace ms {

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) MS_FAIL("cannot open directory '", dir, "' to sync it: ", std::strerror(errno));
  ::fsync(fd);
  ::close(fd);
}

void write_file_atomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    MS_FAIL("cannot write '", path, "': ", std::strerror(errno), "; check the directory exists and is writable");
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      MS_FAIL("cannot write '", path, "': ", std::strerror(err), "; free disk space and retry (nothing was replaced)");
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    MS_FAIL("cannot write '", path, "': ", std::strerror(err), " (nothing was replaced)");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    MS_FAIL("cannot replace '", path, "': ", std::strerror(err));
  }
  auto parent = std::filesystem::path(path).parent_path();
  fsync_dir(parent.empty() ? "." : parent.string());
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) MS_FAIL("cannot read '", path, "'");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace ms
