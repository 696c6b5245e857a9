// Page-aligned, zero-initialised host allocations: one per pool, views by offset. Each is an anonymous mapping,
// so its pages are zero and cost no memory until they are written (docs/runtime.md: "Host memory").
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace ms {

void* page_alloc(size_t bytes);  // zero pages, 4096-aligned; throws ms::Error when the mapping fails
void page_free(void* p);

template <class T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) : n_(n), p_(static_cast<T*>(page_alloc(n * sizeof(T)))) {}
  AlignedBuffer(AlignedBuffer&& o) noexcept : n_(std::exchange(o.n_, 0)), p_(std::exchange(o.p_, nullptr)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      page_free(p_);
      n_ = std::exchange(o.n_, 0);
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { page_free(p_); }

  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }
  void zero() {
    if (p_) std::memset(static_cast<void*>(p_), 0, n_ * sizeof(T));
  }

 private:
  size_t n_ = 0;
  T* p_ = nullptr;
};

}  // namespace ms
