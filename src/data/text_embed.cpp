#include "data/text_embed.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/rng.h"

namespace ms {
namespace {

// Amplitude of the position component relative to the unit-variance word vector: small enough
// that a word keeps its identity (cosine ~0.94 between two positions), large enough to be seen.
constexpr double kPositionScale = 0.25;
// Seeds position streams away from word-hash streams.
constexpr uint64_t kPositionSalt = 0x706f736974696f6eull;  // "position"

bool is_word_byte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

std::vector<std::string> split_words(const std::string& caption) {
  std::vector<std::string> words;
  std::string word;
  for (unsigned char c : caption) {
    if (is_word_byte(c)) {
      word.push_back(char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c));
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// v [dim] = unit-variance vector: uniform entries, then rescaled so the mean square is exactly 1.
void unit_variance_vector(uint64_t seed, int64_t dim, std::vector<double>& v) {
  Rng rng(seed);
  double sum_sq = 0;
  for (int64_t d = 0; d < dim; ++d) {
    v[d] = rng.uniform(-1.0, 1.0);
    sum_sq += v[d] * v[d];
  }
  const double scale = std::sqrt(double(dim) / sum_sq);
  for (int64_t d = 0; d < dim; ++d) v[d] *= scale;
}

}  // namespace

int64_t embed_caption(const std::string& caption, int64_t text_len, int64_t text_dim, float* out) {
  MS_CHECK(text_len > 0, "text_len must be positive, got ", text_len);
  MS_CHECK(text_dim > 0, "text_dim must be positive, got ", text_dim);
  MS_CHECK(out != nullptr, "embed_caption: out is null");
  const std::vector<std::string> words = split_words(caption);
  const int64_t rows = std::min<int64_t>(int64_t(words.size()), text_len);
  std::fill(out, out + text_len * text_dim, 0.0f);
  std::vector<double> word_vec(text_dim), pos_vec(text_dim);  // [text_dim] each
  for (int64_t i = 0; i < rows; ++i) {
    unit_variance_vector(fnv1a64(words[i]), text_dim, word_vec);
    unit_variance_vector(kPositionSalt + uint64_t(i), text_dim, pos_vec);
    for (int64_t d = 0; d < text_dim; ++d) out[i * text_dim + d] = float(word_vec[d] + kPositionScale * pos_vec[d]);
  }
  return rows;
}

}  // namespace ms
