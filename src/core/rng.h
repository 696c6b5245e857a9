// Deterministic random numbers. The whole state is one 64-bit counter (splitmix64), so it is
// saved in trainer.json and a resumed run draws exactly the numbers an uninterrupted run would.
#pragma once
#include <cmath>
#include <cstdint>

namespace ms {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : state_(seed) {}
  uint64_t state() const { return state_; }
  void set_state(uint64_t s) { state_ = s; }
  // The state after n more next_u64 calls (the counter moves by the same constant each call).
  uint64_t state_after(uint64_t n) const { return state_ + n * 0x9e3779b97f4a7c15ull; }

  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1): never exactly 0 or 1.
  double uniform() { return (double(next_u64() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal (Box-Muller, one value per two uniforms: simple and stateless).
  double normal() {
    double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  int64_t below(int64_t n) { return int64_t(next_u64() % uint64_t(n)); }

 private:
  uint64_t state_;
};

}  // namespace ms
