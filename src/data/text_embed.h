// Built-in caption embedding: a deterministic stand-in for the T5 encoder when none is available.
#pragma once
#include <cstdint>
#include <string>

namespace ms {

// Embeds a caption as [text_len, text_dim] floats, deterministic across runs and platforms
// (integer hashing and IEEE arithmetic only, no libm transcendentals).
// The caption is lower-cased (ASCII) and split into words on every byte that is not an ASCII
// letter or digit (bytes >= 0x80 count as letters, so UTF-8 words stay whole). Word i < text_len
// becomes row i: a unit-variance pseudo-random vector seeded by the FNV-1a 64-bit hash of the word
// (same word => same vector, different words => nearly orthogonal), plus a small pseudo-random
// component of position i so that word order matters. Rows past the last word are zero.
// out [text_len, text_dim] is fully overwritten. Returns the number of rows used.
int64_t embed_caption(const std::string& caption, int64_t text_len, int64_t text_dim, float* out);

}  // namespace ms
