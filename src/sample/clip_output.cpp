#include "sample/clip_output.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

#include "core/check.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "vae/vae_model.h"

namespace fs = std::filesystem;

namespace ms {
namespace {

const char* const kVideoExtensions[] = {".mp4", ".webm", ".gif", ".mkv", ".avi"};

std::string lower_extension(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  return ext;
}

bool is_video_extension(const std::string& ext) {
  return std::find(std::begin(kVideoExtensions), std::end(kVideoExtensions), ext) != std::end(kVideoExtensions);
}

}  // namespace

std::string clip_output_path(const std::string& out, int64_t channels, bool decodes) {
  const std::string ext = lower_extension(out);
  if (ext == ".safetensors") return out;
  if (!is_video_extension(ext))
    MS_FAIL("--out '", out, "' has extension '", ext, "'; use .mp4, .webm, .gif, .mkv or .avi for a video, or ",
            ".safetensors for the raw sample");
  if (channels == 3 || decodes) return out;
  const std::string latents = fs::path(out).replace_extension(".safetensors").string();
  log_warn("the model works in a ", channels, "-channel latent space (in_dim ", channels,
           "): its samples become a video through the VAE (--vae Wan2.1_VAE.pth); without one, writing ",
           "the latents to ", latents, " instead of ", out);
  return latents;
}

void check_vae_decodes(const VaeConfig& vae, int64_t in_dim, const std::string& what) {
  if (vae.z_dim != in_dim)
    MS_FAIL(what, " has ", vae.z_dim, " latent channels, the model ", in_dim,
            " (in_dim): pass the VAE whose latents the model is trained on");
}

RgbVideo clip_to_rgb(const float* x, const DataShape& shape, double fps) {
  MS_CHECK(shape.channels == 3, "a video needs 3 channels, got ", shape.channels, " (use clip_output_path)");
  RgbVideo v;
  v.frames = shape.frames;
  v.height = shape.height;
  v.width = shape.width;
  v.fps = fps;
  const int64_t plane = shape.frames * shape.height * shape.width;  // one channel of x
  v.rgb.resize(size_t(plane * 3));                                  // [F, H, W, 3]
  for (int64_t i = 0; i < plane; ++i)
    for (int64_t ch = 0; ch < 3; ++ch) {
      const float p = std::round((x[ch * plane + i] + 1.0f) * 127.5f);
      v.rgb[size_t(i * 3 + ch)] = uint8_t(std::clamp(std::isnan(p) ? 0.0f : p, 0.0f, 255.0f));
    }
  return v;
}

void write_clip(const std::string& path, const float* x, const DataShape& shape, double fps, VaeOps* vae,
                const VaeChunking& chunking) {
  if (lower_extension(path) == ".safetensors") {
    write_safetensors(path, {{"latents", DType::f32, {1, shape.channels, shape.frames, shape.height, shape.width}, x}});
    return;
  }
  encode_video(path, clip_video(x, shape, fps, vae, chunking));
}

RgbVideo clip_video(const float* x, const DataShape& shape, double fps, VaeOps* vae, const VaeChunking& chunking) {
  if (shape.channels == 3) return clip_to_rgb(x, shape, fps);
  MS_CHECK(vae, "a ", shape.channels, "-channel clip needs a VAE to become a video (use clip_output_path)");
  const VaeConfig& c = vae->weights().config();
  check_vae_decodes(c, shape.channels, "the VAE");
  const DataShape video{3, c.video_frames(shape.frames), shape.height * c.space_stride(),
                        shape.width * c.space_stride()};
  std::vector<float> pixels(size_t(3 * video.frames * video.height * video.width));  // [3, F, H, W]
  vae_decode(*vae, x, shape.frames, shape.height, shape.width, pixels.data(), chunking);
  return clip_to_rgb(pixels.data(), video, fps);
}

}  // namespace ms
