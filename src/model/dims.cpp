#include "model/dims.h"

#include "core/check.h"

namespace ms {

ModelDims ModelDims::make(const ModelConfig& c, int64_t B, int64_t F, int64_t H, int64_t W, int64_t Lc,
                          int64_t time_rows) {
  if (B <= 0) MS_FAIL("batch size must be positive, got ", B);
  const int64_t ext[3] = {F, H, W};
  const char* names[3] = {"frames", "height", "width"};
  for (int i = 0; i < 3; ++i)
    if (ext[i] <= 0 || ext[i] % c.patch_size[i])
      MS_FAIL("latent ", names[i], " ", ext[i], " must be a positive multiple of the patch size ", c.patch_size[i]);
  if (Lc <= 0 || Lc > c.text_len)
    MS_FAIL("context has ", Lc, " rows; it must have between 1 and text_len = ", c.text_len, " rows");
  ModelDims d;
  d.B = B;
  d.F = F;
  d.H = H;
  d.W = W;
  d.f = F / c.patch_size[0];
  d.h = H / c.patch_size[1];
  d.w = W / c.patch_size[2];
  d.L = d.f * d.h * d.w;
  d.Lc = Lc;
  d.Lt = c.text_len;
  if (time_rows <= 0 || d.L % time_rows)
    MS_FAIL(time_rows, " timesteps per sample do not divide its ", d.L, " tokens into equal runs (one per latent ",
            "frame: ", d.f, ")");
  d.time_rows = time_rows;
  return d;
}

StepShapes::StepShapes(std::vector<ModelDims> shapes) : all(std::move(shapes)) {
  MS_CHECK(!all.empty(), "StepShapes needs at least one shape");
  for (const ModelDims& d : all) MS_CHECK(d.Lt == all.front().Lt, "step shapes disagree on text_len");
}

bool StepShapes::fits(const ModelDims& d) const {
  for (const ModelDims& s : all)
    if (d.B >= 1 && d.B <= s.B && d.Bt() <= s.Bt() && d.F == s.F && d.H == s.H && d.W == s.W && d.Lt == s.Lt && d.Lc <= s.Lc) return true;
  return false;
}

}  // namespace ms
