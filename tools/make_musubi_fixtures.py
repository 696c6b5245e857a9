#!/usr/bin/python3
"""Generate the musubi-tuner Wan cache fixtures under tests/data/musubi/.

Run once from the repository root, then commit the output:

    /usr/bin/python3 tools/make_musubi_fixtures.py

Needs Debian's python3-torch (for bf16/f16 bytes); the C++ tests read the committed files and never
need torch. The files follow musubi-tuner's own writers (kohya-ss/musubi-tuner, src/musubi_tuner/dataset/
cache_io.py: save_latent_cache_wan, save_latent_cache_common, save_text_encoder_output_cache_wan,
save_text_encoder_output_cache_common, and image_video_dataset.py's get_latent_cache_path /
get_text_encoder_output_cache_path and item keys `{body}_{pos:05d}-{count:03d}`):

  latent file  {item}_{W:04d}x{H:04d}_wan.safetensors                       (image)
               {item}_{pos:05d}-{count:03d}[-NN]_{W:04d}x{H:04d}_wan.safetensors (video clip)
               tensor latents_{F}x{H}x{W}_{dtype} [16, F, H, W]; optional clip_{dtype},
               latents_image_{F}x{H}x{W}_{dtype}, f_indices_int32
               metadata architecture=wan, width, height (the source's size), format_version=1.0.1,
               frame_count (video clips only)
  text file    {item}_wan_te.safetensors: varlen_t5_{dtype} [L, 4096]
               metadata architecture=wan, caption1, format_version=1.0.1

written as safetensors.torch.save_file lays a file out: u64 header length, the JSON header
(__metadata__ first, tensors sorted by dtype alignment then name, contiguous offsets), padded with
spaces to a multiple of 8, then the data. The script seeds every tensor, so its output is deterministic.

Items (cache/):
  clipA    two chunks of one video (bf16), positions 0 and 8, 9 frames each -> latents [16, 3, 6, 8]
  clip_b   a video clip with a section index (-01) and an underscore in its name (f16), with the i2v
           tensors clip_float16, latents_image_* and f_indices_int32 a t2v model ignores
  photo_1  an image (f32) -> latents [16, 1, 6, 8]
  orphan   a video clip without its text file (musubi skips it with a warning: bad data here)
  wide     a clip of another bucket: 5 frames at 48x32 -> latents [16, 2, 4, 6] (bf16)

expected.json: per latent file, its item, the latent key, shape and dtype, whether it is a video,
and the float64 sum and sum of squares of its latents and of its text embedding (as f32 values), and
their first 6 values; per text file, L.
"""
import json
import os
import struct

import torch

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "musubi")
SAFETENSORS_DTYPE = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.int32: "I32"}
TEXT_DIM = 4096


def dtype_to_str(dtype):  # musubi's model_utils.dtype_to_str
    return str(dtype).split(".")[-1]


def save_file(tensors, path, metadata):
    """safetensors.torch.save_file's layout, written without the safetensors package."""
    order = sorted(tensors.items(), key=lambda kv: (-kv[1].element_size(), kv[0]))
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for name, t in order:
        data = t.contiguous().view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": SAFETENSORS_DTYPE[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def stats(t):
    v = t.to(torch.float32).to(torch.float64).flatten()
    return {"sum": float(v.sum()), "sumsq": float((v * v).sum()), "first": [float(x) for x in v[:6]]}


def latent_name(item, size, pos_count=None):
    w, h = size
    field = "" if pos_count is None else f"_{pos_count}"
    return f"{item}{field}_{w:04d}x{h:04d}_wan.safetensors"


def write_latent(cache, item, size, shape, dtype, seed, frame_count=None, pos_count=None, i2v=False):
    torch.manual_seed(seed)
    latent = torch.randn(shape).to(dtype)  # [16, F, H, W]
    _, F, H, W = shape
    d = dtype_to_str(dtype)
    key = f"latents_{F}x{H}x{W}_{d}"
    sd = {key: latent}
    if i2v:
        sd[f"clip_{d}"] = torch.randn(1, 7).to(dtype)
        sd[f"latents_image_{F}x{H}x{W}_{d}"] = torch.randn(shape).to(dtype)
        sd[f"f_indices_{dtype_to_str(torch.int32)}"] = torch.tensor([0, 2], dtype=torch.int32)
    metadata = {"architecture": "wan", "width": f"{size[0]}", "height": f"{size[1]}", "format_version": "1.0.1"}
    if frame_count is not None:
        metadata["frame_count"] = f"{frame_count}"
    name = latent_name(item, size, pos_count)
    save_file(sd, os.path.join(cache, name), metadata)
    return name, {"item": item, "key": key, "shape": list(shape), "dtype": d, "video": frame_count is not None,
                  "latents": stats(latent)}


def write_text(cache, item, rows, dtype, seed, caption):
    torch.manual_seed(seed)
    embed = torch.randn(rows, TEXT_DIM).to(dtype)  # [L, 4096]
    save_file({f"varlen_t5_{dtype_to_str(dtype)}": embed}, os.path.join(cache, f"{item}_wan_te.safetensors"),
              {"architecture": "wan", "caption1": caption, "format_version": "1.0.1"})
    return {"rows": rows, "context": stats(embed)}


def main():
    cache = os.path.join(OUT_DIR, "cache")
    os.makedirs(cache, exist_ok=True)
    for f in os.listdir(cache):
        os.remove(os.path.join(cache, f))
    texts = {
        "clipA": write_text(cache, "clipA", 5, torch.bfloat16, 11, "a red kite over the sea"),
        "clip_b": write_text(cache, "clip_b", 3, torch.float16, 12, "two cats"),
        "photo_1": write_text(cache, "photo_1", 4, torch.float32, 13, "a photo"),
        "wide": write_text(cache, "wide", 2, torch.bfloat16, 14, "a wide shot"),
    }
    latents = dict([
        write_latent(cache, "clipA", (64, 48), (16, 3, 6, 8), torch.bfloat16, 1, 9, "00000-009"),
        write_latent(cache, "clipA", (64, 48), (16, 3, 6, 8), torch.bfloat16, 2, 9, "00008-009"),
        write_latent(cache, "clip_b", (64, 48), (16, 3, 6, 8), torch.float16, 3, 9, "00000-009-01", i2v=True),
        write_latent(cache, "photo_1", (64, 48), (16, 1, 6, 8), torch.float32, 4),
        write_latent(cache, "orphan", (64, 48), (16, 3, 6, 8), torch.bfloat16, 5, 9, "00000-009"),
        write_latent(cache, "wide", (48, 32), (16, 2, 4, 6), torch.bfloat16, 6, 5, "00000-005"),
    ])
    with open(os.path.join(OUT_DIR, "expected.json"), "w") as f:
        json.dump({"latents": latents, "texts": texts}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
