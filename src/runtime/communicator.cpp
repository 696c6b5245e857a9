#include "runtime/communicator.h"

#include <cstdlib>
#include <cstring>

namespace ms {

void Communicator::reduce_scatter(Channel c, float* buf, int64_t chunk, std::span<const float> weight) {
  const int n = size(), r = rank();
  std::vector<float>& parts = scratch_[int(c)];  // [n x chunk]: part r of every rank
  parts.resize(size_t(n * chunk));
  alltoall(c, buf, parts.data(), size_t(chunk) * sizeof(float));
  float* out = buf + r * chunk;
  for (int64_t i = 0; i < chunk; ++i) out[i] = weight[0] * parts[size_t(i)];
  for (int j = 1; j < n; ++j) {
    const float* p = parts.data() + j * chunk;
    const float w = weight[size_t(j)];
    for (int64_t i = 0; i < chunk; ++i) out[i] += w * p[i];
  }
}

std::vector<double> Communicator::gather(Channel c, std::span<const double> mine) {
  std::vector<double> all(mine.size() * size_t(size()));
  if (!mine.empty()) std::memcpy(all.data() + mine.size() * size_t(rank()), mine.data(), mine.size_bytes());
  allgather(c, all.data(), mine.size_bytes());  // a barrier when mine is empty
  return all;
}

double Communicator::sum(Channel c, double x) {
  double total = 0;
  for (double v : gather(c, std::span<const double>(&x, 1))) total += v;
  return total;
}

double Communicator::from_lead(Channel c, double x) { return gather(c, std::span<const double>(&x, 1))[0]; }

void Communicator::barrier(Channel c) { gather(c, std::span<const double>()); }

void SingleProcess::alltoall(Channel, const void* send, void* recv, size_t bytes) {
  if (send != recv && bytes) std::memmove(recv, send, bytes);
}

void SingleProcess::abort(int code) noexcept { std::_Exit(code); }

}  // namespace ms
