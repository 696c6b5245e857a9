#include "plan/video_shape.h"

#include <sstream>

#include "core/check.h"
#include "core/text.h"

namespace ms {

LatentShape latent_shape(const ModelConfig& c, const VideoShape& v) {
  if (v.batch <= 0) MS_FAIL("--batch-size must be positive, got ", v.batch);
  const char* names[3] = {"--frames", "--height", "--width"};
  const int64_t px[3] = {v.frames, v.height, v.width};
  for (int i = 0; i < 3; ++i) {
    if (px[i] <= 0) MS_FAIL(names[i], " must be positive, got ", px[i]);
    if (v.vae_stride[size_t(i)] <= 0) MS_FAIL("--vae-stride entries must be positive, got ", v.vae_stride[size_t(i)]);
  }
  const int64_t st = v.vae_stride[0];
  if (st > 1 && (v.frames - 1) % st)
    MS_FAIL("--frames ", v.frames, " with a temporal VAE stride of ", st, " must be ", st, "n+1 (the first frame is ",
            "coded alone); use ", (v.frames - 1) / st * st + 1, " or ", ((v.frames - 1) / st + 1) * st + 1,
            ", or --vae-stride 1,", v.vae_stride[1], ",", v.vae_stride[2], " for per-frame latents");
  LatentShape s;
  int64_t F = st > 1 ? (v.frames - 1) / st + 1 : v.frames;
  if (F % c.patch_size[0]) {
    const int64_t padded = (F / c.patch_size[0] + 1) * c.patch_size[0];
    s.notes.push_back(
        cat("latent frames ", F, " padded to ", padded, " (a multiple of the temporal patch ", c.patch_size[0], ")"));
    F = padded;
  }
  int64_t ext[2];
  int64_t* padded_px[2] = {&s.height, &s.width};
  for (int i = 0; i < 2; ++i) {
    const int64_t unit = v.vae_stride[size_t(i + 1)] * c.patch_size[size_t(i + 1)];  // pixels per token
    const int64_t tokens = (px[i + 1] + unit - 1) / unit;
    *padded_px[i] = tokens * unit;
    ext[i] = tokens * c.patch_size[size_t(i + 1)];
    if (*padded_px[i] != px[i + 1])
      s.notes.push_back(cat(names[i + 1] + 2, " ", px[i + 1], " padded to ", *padded_px[i],
                            " (a multiple of VAE stride ", v.vae_stride[size_t(i + 1)], " x patch ",
                            c.patch_size[size_t(i + 1)], ")"));
  }
  s.dims = ModelDims::make(c, v.batch, F, ext[0], ext[1], c.text_len);
  return s;
}

std::array<int64_t, 3> parse_triple(const std::string& text, const std::string& what) {
  std::array<int64_t, 3> r{};
  std::istringstream in(text);
  char sep1 = 0, sep2 = 0;
  if (!(in >> r[0] >> sep1 >> r[1] >> sep2 >> r[2]) || sep1 != ',' || sep2 != ',' || !(in >> std::ws).eof())
    MS_FAIL(what, " ", quote_text(text), " must be three comma-separated integers, e.g. 4,8,8");
  for (int64_t x : r)
    if (x <= 0) MS_FAIL(what, " ", quote_text(text), " must be positive integers");
  return r;
}

}  // namespace ms
