// Activation buffers laid out by a visitor, like the parameter pools: the same function sizes the
// buffer (for the arena and for `plan`) and binds the named pointers.
#pragma once
#include <cstdint>

namespace ms {

// Returns the elements a layout needs: visit(ws, f) calls f(numel, field) for every buffer.
template <class WS, class Visit>
int64_t workspace_numel(Visit&& visit) {
  WS ws{};
  int64_t total = 0;
  visit(ws, [&](int64_t n, auto&) { total += n; });
  return total;
}

template <class WS, class T, class Visit>
WS bind_workspace(T* base, Visit&& visit) {
  WS ws{};
  int64_t offset = 0;
  visit(ws, [&](int64_t n, auto& field) {
    field = base + offset;
    offset += n;
  });
  return ws;
}

}  // namespace ms
