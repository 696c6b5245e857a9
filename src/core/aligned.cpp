#include "core/aligned.h"

#include <sys/mman.h>

#include <cerrno>

#include "core/check.h"
#include "core/units.h"

namespace ms {
namespace {

// The mapping's length is kept in the page before the returned pointer, so that page_free needs only the pointer.
constexpr size_t kPage = 4096;

}  // namespace

void* page_alloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t length = kPage + (bytes + kPage - 1) / kPage * kPage;
  // Anonymous pages are zero and cost nothing until touched: a pool is resident only as far as it is used.
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    MS_FAIL("out of host memory mapping ", format_bytes(double(bytes)), " (", std::strerror(errno),
            "); `megaslide plan` shows what a run needs. Use a smaller model, batch or video size");
  *static_cast<size_t*>(p) = length;
  return static_cast<char*>(p) + kPage;
}

void page_free(void* p) {
  if (!p) return;
  char* base = static_cast<char*>(p) - kPage;
  munmap(base, *reinterpret_cast<size_t*>(base));
}

}  // namespace ms
