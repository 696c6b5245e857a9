#include "io/gif_palette.h"

#include <algorithm>
#include <limits>

namespace ms {
namespace {

uint32_t rgb_key(const uint8_t* p) { return uint32_t(p[0]) << 16 | uint32_t(p[1]) << 8 | p[2]; }
uint32_t bin_key(const uint8_t* p) { return uint32_t(p[0] >> 3) << 10 | uint32_t(p[1] >> 3) << 5 | (p[2] >> 3); }

struct Bin {
  std::array<int, 3> c;         // 5-bit coordinates
  int64_t n = 0;                // pixels
  std::array<double, 3> sum{};  // sum of their 8-bit values per channel
};

// Median cut: splits the box with the widest channel extent at its pixel-weighted median until
// there are `colours` boxes (or no box can be split); returns each box's mean colour.
std::vector<std::array<uint8_t, 3>> median_cut(std::vector<Bin> bins, size_t colours) {
  struct Box {
    size_t begin, end;
  };
  std::vector<Box> boxes{{0, bins.size()}};
  auto extent = [&](const Box& b, int axis) {
    int lo = 31, hi = 0;
    for (size_t i = b.begin; i < b.end; ++i) lo = std::min(lo, bins[i].c[axis]), hi = std::max(hi, bins[i].c[axis]);
    return hi - lo;
  };
  while (boxes.size() < colours) {
    int best = -1, best_axis = 0, best_extent = 0;
    for (size_t k = 0; k < boxes.size(); ++k)
      for (int a = 0; a < 3; ++a)
        if (boxes[k].end - boxes[k].begin >= 2 && extent(boxes[k], a) > best_extent)
          best = int(k), best_axis = a, best_extent = extent(boxes[k], a);
    if (best < 0) break;
    Box& b = boxes[size_t(best)];
    const int a = best_axis;
    std::sort(bins.begin() + long(b.begin), bins.begin() + long(b.end), [a](const Bin& x, const Bin& y) {
      return std::tie(x.c[a], x.c[(a + 1) % 3], x.c[(a + 2) % 3]) <
             std::tie(y.c[a], y.c[(a + 1) % 3], y.c[(a + 2) % 3]);
    });
    int64_t total = 0, run = 0;
    for (size_t i = b.begin; i < b.end; ++i) total += bins[i].n;
    size_t m = b.begin + 1;
    for (size_t i = b.begin; i + 1 < b.end; ++i) {
      run += bins[i].n;
      m = i + 1;
      if (2 * run >= total) break;
    }
    boxes.push_back({m, b.end});
    boxes[size_t(best)].end = m;
  }
  std::vector<std::array<uint8_t, 3>> out;
  for (const Box& b : boxes) {
    std::array<double, 3> s{};
    int64_t n = 0;
    for (size_t i = b.begin; i < b.end; ++i) {
      for (int a = 0; a < 3; ++a) s[size_t(a)] += bins[i].sum[size_t(a)];
      n += bins[i].n;
    }
    std::array<uint8_t, 3> c;
    for (int a = 0; a < 3; ++a) c[size_t(a)] = uint8_t(std::clamp(s[size_t(a)] / double(n) + 0.5, 0.0, 255.0));
    out.push_back(c);
  }
  return out;
}

}  // namespace

GifPalette::GifPalette(const uint8_t* rgb, int64_t pixels) {
  std::vector<uint32_t> distinct;
  for (int64_t i = 0; i < pixels && distinct.size() <= 256; ++i)
    if (exact_.emplace(rgb_key(rgb + 3 * i), 0).second) distinct.push_back(rgb_key(rgb + 3 * i));
  if (distinct.size() <= 256) {
    std::sort(distinct.begin(), distinct.end());
    for (size_t k = 0; k < distinct.size(); ++k) {
      exact_[distinct[k]] = uint8_t(k);
      argb_[k] = 0xff000000u | distinct[k];
    }
    for (size_t k = distinct.size(); k < 256; ++k) argb_[k] = 0xff000000u;
    return;
  }
  exact_.clear();
  std::vector<Bin> hist(32768);  // [32768] by 5-bit RGB
  for (int64_t i = 0; i < pixels; ++i) {
    const uint8_t* p = rgb + 3 * i;
    Bin& b = hist[bin_key(p)];
    ++b.n;
    for (int a = 0; a < 3; ++a) b.sum[size_t(a)] += p[a];
  }
  std::vector<Bin> used;
  for (uint32_t k = 0; k < hist.size(); ++k)
    if (hist[k].n > 0) {
      hist[k].c = {int(k >> 10), int(k >> 5 & 31), int(k & 31)};
      used.push_back(hist[k]);
    }
  const auto colours = median_cut(std::move(used), 256);
  for (size_t k = 0; k < 256; ++k)
    argb_[k] = k < colours.size()
                   ? 0xff000000u | uint32_t(colours[k][0]) << 16 | uint32_t(colours[k][1]) << 8 | colours[k][2]
                   : 0xff000000u;
  colours_ = colours;
}

void GifPalette::map(const uint8_t* rgb, int64_t pixels, uint8_t* out) const {
  std::unordered_map<uint32_t, uint8_t> nearest;  // 0xRRGGBB -> index, filled as colours appear
  for (int64_t i = 0; i < pixels; ++i) {
    const uint8_t* p = rgb + 3 * i;
    if (!exact_.empty()) {
      out[i] = exact_.at(rgb_key(p));
      continue;
    }
    auto [it, fresh] = nearest.emplace(rgb_key(p), 0);
    if (fresh) {
      int best_d = std::numeric_limits<int>::max();
      for (size_t k = 0; k < colours_.size(); ++k) {
        const int dr = p[0] - colours_[k][0], dg = p[1] - colours_[k][1], db = p[2] - colours_[k][2];
        const int d = dr * dr + dg * dg + db * db;
        if (d < best_d) it->second = uint8_t(k), best_d = d;
      }
    }
    out[i] = it->second;
  }
}

}  // namespace ms
