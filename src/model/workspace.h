// Activation buffers laid out by a visitor, like the parameter pools: the same function sizes the
// buffer (for the arena and for `plan`) and binds the named pointers. Buffers of mixed element types
// (bf16 activations, fp32 statistics on a GPU) follow each other, each starting at a multiple of `align`
// bytes; with align the size of the only element type the layout is dense.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "model/dims.h"

namespace ms {

template <class P>
using Pointee = std::remove_pointer_t<std::remove_reference_t<P>>;

// bytes rounded up to a multiple of align: what one buffer of the layout takes.
inline int64_t round_up(int64_t bytes, int64_t align) { return (bytes + align - 1) / align * align; }

// Bytes of one buffer of n elements of `field`'s type, rounded up to `align`.
template <class P>
int64_t aligned_bytes(int64_t n, int64_t align) {
  return round_up(n * int64_t(sizeof(Pointee<P>)), align);
}

// Returns the bytes a layout needs: visit(ws, f) calls f(numel, field) for every buffer.
template <class WS, class Visit>
int64_t workspace_bytes(Visit&& visit, int64_t align) {
  WS ws{};
  int64_t total = 0;
  visit(ws, [&](int64_t n, auto& field) { total += aligned_bytes<decltype(field)>(n, align); });
  return total;
}

// Binds every buffer of the layout into base [workspace_bytes(visit, align)], aligned to `align`.
template <class WS, class Visit>
WS bind_workspace(void* base, Visit&& visit, int64_t align) {
  WS ws{};
  char* p = static_cast<char*>(base);
  visit(ws, [&](int64_t n, auto& field) {
    field = reinterpret_cast<Pointee<decltype(field)>*>(p);
    p += aligned_bytes<decltype(field)>(n, align);
  });
  return ws;
}

// One layout for every shape of a run: visit(dims, ws, f) lays the workspace out for one shape; the visitor returned
// lays out the same buffers in the same order, each as large as the largest shape needs it (for workspace_bytes and
// bind_workspace). A step at any of the shapes then finds every buffer large enough.
template <class WS, class Visit>
auto shapes_visitor(const StepShapes& shapes, Visit visit) {
  std::vector<int64_t> most;  // per buffer, in visiting order
  for (const ModelDims& d : shapes.all) {
    WS ws{};
    size_t i = 0;
    visit(d, ws, [&](int64_t n, auto&) {
      if (i == most.size())
        most.push_back(n);
      else
        most[i] = std::max(most[i], n);
      ++i;
    });
    MS_CHECK(i == most.size(), "a workspace layout visits ", i, " buffers for one shape and ", most.size(),
             " for another");
  }
  return [most = std::move(most), visit, first = shapes.all.front()](auto& ws, auto&& f) {
    size_t i = 0;
    visit(first, ws, [&](int64_t, auto& field) { f(most[i++], field); });
  };
}

}  // namespace ms
