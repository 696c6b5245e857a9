// Wan2.1's video VAE forward on the CPU: videos -> normalised latents and back, streamed in Wan's causal chunks
// (frame 0 alone, then 4 frames at a time to encode; one latent frame at a time to decode), each causal convolution
// carrying its last two input frames from chunk to chunk, so that memory is bounded by the chunk, not the clip, and
// the result equals one causal pass over the whole clip (docs/vae.md).
#pragma once
#include <cstdint>

#include "core/memory_usage.h"
#include "model/vae_weights.h"
#include "runtime/vae_ops.h"

namespace ms {

// How a clip is cut. encode_frames: frames per chunk after frame 0 (a multiple of 4: the temporal downsamplers'
// stride-2 alignment); decode_latents: latent frames per chunk after frame 0. Wan's own: 4 and 1. Any other valid
// choice gives the same result up to float rounding; larger chunks hold more activations at once.
// tile_h, tile_w: spatial tiles in pixels (multiples of 8; 0 = the whole frame): each tile is encoded or decoded as
// a clip of its own, tiles overlap by a quarter and are blended linearly over the overlaps, as Wan's tools do for
// large frames. That bounds memory by the tile; the result differs from the untiled one near the seams.
struct VaeChunking {
  int64_t encode_frames = 4;
  int64_t decode_latents = 1;
  int64_t tile_h = 0, tile_w = 0;
};

// Throws ms::Error unless tile_h and tile_w are 0 or multiples of 8 of at least 32 pixels (what: "--vae-tile").
void check_vae_tile(const VaeChunking& chunking, const std::string& what);

// The frame sizes a clip of `frames` x `height` x `width` pixels may have: F = 1 + 4k, H and W multiples of the
// spatial stride (8). Throws ms::Error naming the bad value and the nearest valid ones (what: "video", "--frames").
void check_vae_video_shape(const VaeConfig& c, int64_t frames, int64_t height, int64_t width, const std::string& what);

// video [3, F, H, W] in [-1, 1] (one clip, torch's layout) -> latents [z_dim, 1 + (F - 1) / 4, H / 8, W / 8]: the
// latent mean, normalised with the config's latents_mean / latents_std, as Wan's WanVAE.encode returns it. ops:
// where the pass runs and with which VAE (vae_ops.h); video and latents are host memory.
void vae_encode(VaeOps& ops, const float* video, int64_t frames, int64_t height, int64_t width, float* latents,
                const VaeChunking& chunking = {});

// latents [z_dim, T, h, w] -> video [3, 1 + 4 (T - 1), 8 h, 8 w], clamped to [-1, 1], as WanVAE.decode returns it.
void vae_decode(VaeOps& ops, const float* latents, int64_t latent_frames, int64_t height, int64_t width, float* video,
                const VaeChunking& chunking = {});

// The same on the CPU (backend/cpu/vae_ops.h), defined in vae_cpu.cpp.
void vae_encode(const VaeWeights& w, const float* video, int64_t frames, int64_t height, int64_t width, float* latents,
                const VaeChunking& chunking = {});
void vae_decode(const VaeWeights& w, const float* latents, int64_t latent_frames, int64_t height, int64_t width,
                float* video, const VaeChunking& chunking = {});

// Multiply-adds x 2 of encoding / decoding one clip of that pixel size (every convolution and the attention's two
// matrix products; norms and activations left out).
double vae_encode_flops(const VaeConfig& c, int64_t frames, int64_t height, int64_t width);
double vae_decode_flops(const VaeConfig& c, int64_t frames, int64_t height, int64_t width);

// Host bytes vae_encode / vae_decode hold beside their input, output and weights for a clip of that pixel size: the
// most activations a pass holds at once, counted by a dry pass of the same walk (every chunk, carried frame and
// attention scratch, and the convolutions' unfolded band of up to 64 MiB), and with tiles one tile's pass, the tile
// buffers and the blend's accumulators. What the verbs check against the host memory they can get.
int64_t vae_encode_bytes(const VaeConfig& c, int64_t frames, int64_t height, int64_t width,
                         const VaeChunking& chunking = {});
int64_t vae_decode_bytes(const VaeConfig& c, int64_t frames, int64_t height, int64_t width,
                         const VaeChunking& chunking = {});

// Throws ms::Error (require_host_memory, core/memory_usage.h) unless encoding (or decoding) one clip of that pixel
// size fits in `limit`: its output and vae_encode_bytes / vae_decode_bytes. Names --vae-tile 256,256 as the fix when
// tiles would fit. what: "vae encode", "clip 'a.mp4'".
void check_vae_fits(const VaeConfig& c, bool encode, int64_t frames, int64_t height, int64_t width,
                    const VaeChunking& chunking, const HostLimit& limit, const std::string& what);

}  // namespace ms
