#!/usr/bin/python3
"""Wan2.2's video VAE in PyTorch float32 on the CPU, Wan's own module: the peer of `megaslide bench vae --kind wan2.2`.

Not a test and not part of the build: it needs Debian's python3-torch (1.13), numpy and a git mirror of
Wan-Video/Wan2.2 (default /work/.mirror/Wan-Video+Wan2.2/repo), whose wan/modules/vae2_2.py it imports as
tools/make_vae22_fixtures.py does (the same stand-ins for einops and scaled_dot_product_attention, which torch 1.13
lacks). The model is WanVAE_ at Wan2_2_VAE's config (704.7 M parameters, random weights seeded as the fixtures'),
called as Wan2_2_VAE calls it: encode(video, [mean, 1 / std]) in Wan's chunks, decode(latents, scale).

For each size HxW it builds a --frames clip in [-1, 1], times encode and then decode of its latents (torch.no_grad,
wall clock, after a warm-up on a 16 x 16 frame) and reports frames/s, seconds, GFLOP (2 x the multiply-adds of every
convolution, counted by forward hooks on the shapes run; the attention's products, norms and copies not counted),
GFLOP/s, its ratio to a float32 sgemm ceiling (torch.matmul 2048^3, best of 5, same run) and peak RSS.

  /usr/bin/python3 bench/vae22_torch.py [--sizes 128x224] [--frames 5] [--threads N] [--wan-repo DIR] [--json]

Its numbers go to docs/benchmarks.md, next to `megaslide bench vae --kind wan2.2`'s, with the machine and command.
"""
import argparse
import json
import os
import resource
import sys
import tempfile
import time
import types

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import make_vae_fixtures as v21  # noqa: E402
import make_vae22_fixtures as v22  # noqa: E402


def sgemm_rate():
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    best = 1e30
    for _ in range(5):
        t = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - t)
    return 2 * 2048 ** 3 / best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="128x224")
    ap.add_argument("--frames", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--wan-repo", default=v22.DEFAULT_WAN_REPO)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory(prefix="vae22_bench_") as tmp:
        if v21.install_standins()["einops"].startswith("stand-in"):
            sys.modules["einops"] = types.SimpleNamespace(rearrange=v22.rearrange)
        path = v21.extract(v21.resolve_gitdir(a.wan_repo), v22.WAN_VAE_PY, os.path.join(tmp, "wan_vae22.py"))
        wan = v21.load_module("wan_vae22", path)
        mean, std = v21.latent_constants(path, "Wan2_2_VAE")
    torch.manual_seed(0)
    with v21.no_init():
        model = wan.WanVAE_(**v22.WAN22, dropout=0.0).float().eval()
    v21.seed_weights(model, v22.WEIGHT_SEED)
    scale = [torch.tensor(mean), 1.0 / torch.tensor(std)]
    flops = [0.0]

    def count(module, inputs, output):
        flops[0] += 2.0 * output.numel() * module.weight[0].numel()

    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Conv3d)):
            m.register_forward_hook(count)
    sgemm = sgemm_rate()
    result = {"threads": a.threads, "params": sum(p.numel() for p in model.parameters()), "frames": a.frames,
              "sgemm_gflops": sgemm / 1e9, "torch": torch.__version__, "sizes": []}
    with torch.no_grad():
        model.decode(model.encode(torch.zeros(1, 3, 1, 16, 16), scale), scale)  # warm-up
        for size in a.sizes.split(","):
            h, w = (int(v) for v in size.split("x"))
            g = torch.Generator().manual_seed(1)
            video = (0.5 * torch.randn(1, 3, a.frames, h, w, generator=g)).clamp(-1, 1)
            row = {"size": size}
            for what in ("encode", "decode"):
                flops[0] = 0.0
                t = time.perf_counter()
                if what == "encode":
                    latents = model.encode(video, scale)
                else:
                    model.decode(latents, scale)
                s = time.perf_counter() - t
                row[what] = {"seconds": s, "frames_per_s": a.frames / s, "gflop": flops[0] / 1e9,
                             "gflops": flops[0] / s / 1e9, "of_sgemm": flops[0] / s / sgemm}
            result["sizes"].append(row)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if a.json:
        print(json.dumps(result))
        return 0
    print(f"Wan2.2 VAE in PyTorch {torch.__version__} (Wan's vae2_2.py, {result['params'] / 1e6:.1f} M parameters), "
          f"{a.threads} threads; sgemm 2048^3 {sgemm / 1e9:.1f} GFLOP/s")
    for row in result["sizes"]:
        for what in ("encode", "decode"):
            r = row[what]
            print(f"  {row['size']:>8} {a.frames} frames {what}: {r['seconds']:8.2f} s, {r['frames_per_s']:7.3f} "
                  f"frames/s, {r['gflop']:9.1f} GFLOP, {r['gflops']:6.1f} GFLOP/s, {r['of_sgemm']:.3f} of sgemm")
    print(f"peak RSS {result['peak_rss_mb']:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
