#!/usr/bin/python3
"""The Wan2.1 video VAE in PyTorch float32 on the CPU: the peer that `megaslide bench vae` is compared with.

Not a test and not part of the build: it needs only Debian's python3-torch (1.13) and numpy. It is an independent,
compact float32 implementation (torch.nn.functional) of the semantics specified in shared/reference/vae_ref.py
(causal 3x3x3 convs carrying their last 2 input frames between chunks, RMS norm = F.normalize over channels
* sqrt(C) * gamma, residual blocks with a 1x1x1 shortcut, one-head per-frame middle attention, the down/up
resamplers with their time convs, Wan's chunking: encode frame 0 then 4 frames at a time, decode one latent frame at
a time, latents normalised with Wan's mean/std). Weights are random (seeded, fan-in scaled normal) with the shapes
and names of Wan's state dict; `VAE(cfg, weights)` also accepts such a dict (e.g. vae_ref.random_weights).

For each size HxW it builds a --frames clip in [-1, 1], times encode and then decode of the resulting latents
(torch.no_grad, wall clock, after a warm-up on a tiny clip) and reports frames/s, seconds, GFLOP (2 x the
multiply-adds of every conv -- 3x3x3, 1x1x1, time and resample convs -- and of the attention's projections and
matmuls, counted analytically for the shapes run; norms, activations, softmax and copies are not counted),
GFLOP/s, its ratio to a float32 sgemm ceiling (torch.matmul 2048^3, best of 5, same run) and peak RSS
(getrusage ru_maxrss: the process's peak so far, weights included).

  /usr/bin/python3 bench/vae_torch.py [--sizes 64x64,480x832] [--frames 5] [--threads N] [--json]

Its numbers go to docs/benchmarks.md, next to `megaslide bench vae`'s, with the machine and the command line.
"""
import argparse
import json
import math
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F

CACHE_T = 2
LATENTS_MEAN = [-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
                0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921]
LATENTS_STD = [2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
               3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160]
DEFAULT = dict(dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
               temperal_downsample=[False, True, True], latents_mean=LATENTS_MEAN, latents_std=LATENTS_STD)


# ---------------------------------------------------------------------------------------------------------------
# architecture: (kind, state-dict prefix, c_in, c_out); attn_scales == [] only (the only runnable Wan2.1 setting)
# ---------------------------------------------------------------------------------------------------------------
def layers(cfg, part):
    dim, mult, nrb, z = cfg["dim"], cfg["dim_mult"], cfg["num_res_blocks"], cfg["z_dim"]
    assert not cfg["attn_scales"], "attn_scales != [] is not runnable in Wan2.1"
    out, n = [], 0
    if part == "encoder":
        c = dim
        out.append(("conv", "encoder.conv1", 3, c))
        for lvl, m in enumerate(mult):
            for _ in range(nrb):
                out.append(("res", f"encoder.downsamples.{n}", c, dim * m)); n += 1; c = dim * m
            if lvl < len(mult) - 1:
                kind = "down3d" if cfg["temperal_downsample"][lvl] else "down2d"
                out.append((kind, f"encoder.downsamples.{n}", c, c)); n += 1
        mid, tail = "encoder.middle", ("head", "encoder.head", c, 2 * z)
        out += [("res", mid + ".0", c, c), ("attn", mid + ".1", c, c), ("res", mid + ".2", c, c), tail]
        return out
    c = dim * mult[-1]
    out += [("conv", "decoder.conv1", z, c), ("res", "decoder.middle.0", c, c), ("attn", "decoder.middle.1", c, c),
            ("res", "decoder.middle.2", c, c)]
    time_up = cfg["temperal_downsample"][::-1]
    for lvl, m in enumerate(mult[::-1]):
        for _ in range(nrb + 1):
            out.append(("res", f"decoder.upsamples.{n}", c, dim * m)); n += 1; c = dim * m
        if lvl < len(mult) - 1:
            out.append(("up3d" if time_up[lvl] else "up2d", f"decoder.upsamples.{n}", c, c // 2)); n += 1
            c //= 2
    out.append(("head", "decoder.head", c, 3))
    return out


def param_shapes(cfg):
    """name -> shape, with Wan's state-dict names."""
    def conv(p, co, ci, *k):
        return [(p + ".weight", (co, ci) + k), (p + ".bias", (co,))]
    z, shapes = cfg["z_dim"], []
    for part in ("encoder", "decoder"):
        if part == "decoder":
            shapes += conv("conv1", 2 * z, 2 * z, 1, 1, 1) + conv("conv2", z, z, 1, 1, 1)
        for kind, p, ci, co in layers(cfg, part):
            if kind == "conv":
                shapes += conv(p, co, ci, 3, 3, 3)
            elif kind == "res":
                shapes += [(p + ".residual.0.gamma", (ci, 1, 1, 1))] + conv(p + ".residual.2", co, ci, 3, 3, 3)
                shapes += [(p + ".residual.3.gamma", (co, 1, 1, 1))] + conv(p + ".residual.6", co, co, 3, 3, 3)
                if ci != co:
                    shapes += conv(p + ".shortcut", co, ci, 1, 1, 1)
            elif kind == "attn":
                shapes += [(p + ".norm.gamma", (ci, 1, 1))] + conv(p + ".to_qkv", 3 * ci, ci, 1, 1)
                shapes += conv(p + ".proj", ci, ci, 1, 1)
            elif kind in ("down2d", "down3d", "up2d", "up3d"):
                shapes += conv(p + ".resample.1", co, ci, 3, 3)
                if kind[-2:] == "3d":
                    shapes += conv(p + ".time_conv", (2 if kind == "up3d" else 1) * ci, ci, 3, 1, 1)
            else:  # head
                shapes += [(p + ".0.gamma", (ci, 1, 1, 1))] + conv(p + ".2", co, ci, 3, 3, 3)
    return dict(shapes)


def random_weights(cfg, seed=0):
    g = torch.Generator().manual_seed(seed)
    W = {}
    for name, shape in param_shapes(cfg).items():
        r = torch.randn(shape, generator=g)
        if name.endswith(".gamma"):
            W[name] = r.mul_(0.1).add_(1.0)
        elif name.endswith(".bias"):
            W[name] = r.mul_(0.05)
        else:
            W[name] = r.mul_(1.0 / math.sqrt(math.prod(shape[1:])))
    return W


# ---------------------------------------------------------------------------------------------------------------
# model (float32); `cache` holds, per temporal conv, the last <= 2 frames of its input, and the resamplers' state
# ---------------------------------------------------------------------------------------------------------------
class VAE:
    def __init__(self, cfg, weights=None, seed=0):
        self.cfg = cfg
        shapes = param_shapes(cfg)
        weights = random_weights(cfg, seed) if weights is None else weights
        self.W = {k: weights[k].detach().to(torch.float32).contiguous() for k in shapes}
        for k, s in shapes.items():
            assert tuple(self.W[k].shape) == s, (k, tuple(self.W[k].shape), s)
        for k in list(self.W):  # fold sqrt(C) into the RMS gains; flatten 1x1 / resample weights once
            w = self.W[k]
            if k.endswith(".gamma"):
                self.W[k] = (w * math.sqrt(w.shape[0])).reshape(1, -1, 1, 1, 1)
            elif k.endswith((".to_qkv.weight", ".proj.weight")):
                self.W[k] = w[:, :, 0, 0].contiguous()
        z = cfg["z_dim"]
        self.mean = torch.tensor(cfg["latents_mean"], dtype=torch.float32).view(1, z, 1, 1, 1)
        self.std = torch.tensor(cfg["latents_std"], dtype=torch.float32).view(1, z, 1, 1, 1)
        self.enc, self.dec = layers(cfg, "encoder"), layers(cfg, "decoder")

    def n_params(self):
        return sum(math.prod(s) for s in param_shapes(self.cfg).values())

    # -- primitives
    def norm_silu(self, x, gamma):
        return F.silu(F.normalize(x, dim=1).mul_(self.W[gamma]), inplace=True)

    def causal(self, cache, p, x):
        w, b = self.W[p + ".weight"], self.W[p + ".bias"]
        if w.shape[2] == 1:
            return F.conv3d(x, w, b)
        prev = cache.get(p)
        if prev is None:
            prev = x.new_zeros(x.shape[:2] + (CACHE_T,) + x.shape[3:])
        elif prev.shape[2] < CACHE_T:
            prev = torch.cat([prev.new_zeros(prev.shape[:2] + (CACHE_T - prev.shape[2],) + prev.shape[3:]), prev], 2)
        seq = torch.cat([prev, x], 2)
        cache[p] = seq[:, :, -CACHE_T:].clone()
        return F.conv3d(seq, w, b, padding=(0, w.shape[3] // 2, w.shape[4] // 2))

    @staticmethod
    def per_frame(x, fn):
        B, C, T, H, Wd = x.shape
        y = fn(x.transpose(1, 2).reshape(B * T, C, H, Wd))
        return y.reshape(B, T, *y.shape[1:]).transpose(1, 2)

    def res(self, cache, p, x):
        skip = F.conv3d(x, self.W[p + ".shortcut.weight"], self.W[p + ".shortcut.bias"]) \
            if p + ".shortcut.weight" in self.W else x
        h = self.causal(cache, p + ".residual.2", self.norm_silu(x, p + ".residual.0.gamma"))
        h = self.causal(cache, p + ".residual.6", self.norm_silu(h, p + ".residual.3.gamma"))
        return h.add_(skip)

    def attn(self, p, x):
        B, C, T, H, Wd = x.shape
        h = F.normalize(x, dim=1).mul_(self.W[p + ".norm.gamma"])
        h = h.permute(0, 2, 3, 4, 1).reshape(B * T, H * Wd, C)
        q, k, v = F.linear(h, self.W[p + ".to_qkv.weight"], self.W[p + ".to_qkv.bias"]).chunk(3, -1)
        a = torch.softmax(torch.matmul(q * (1.0 / math.sqrt(C)), k.transpose(1, 2)), -1)
        o = F.linear(torch.matmul(a, v), self.W[p + ".proj.weight"], self.W[p + ".proj.bias"])
        return x + o.reshape(B, T, H, Wd, C).permute(0, 4, 1, 2, 3)

    def down(self, cache, p, x, temporal):
        w, b = self.W[p + ".resample.1.weight"], self.W[p + ".resample.1.bias"]
        x = self.per_frame(x, lambda f: F.conv2d(F.pad(f, (0, 1, 0, 1)), w, b, stride=2))
        if not temporal:
            return x
        key = p + ".time_conv"
        prev = cache.get(key)
        cache[key] = x[:, :, -1:].clone()
        if prev is None:
            return x
        return F.conv3d(torch.cat([prev, x], 2), self.W[key + ".weight"], self.W[key + ".bias"], stride=(2, 1, 1))

    def up(self, cache, p, x, temporal):
        if temporal:
            key = p + ".time_conv"
            if key + "#started" not in cache:
                cache[key + "#started"] = True
            else:
                y = self.causal(cache, key, x)
                B, C2, T, H, Wd = y.shape
                x = y.view(B, 2, C2 // 2, T, H, Wd).permute(0, 2, 3, 1, 4, 5).reshape(B, C2 // 2, 2 * T, H, Wd)
        w, b = self.W[p + ".resample.1.weight"], self.W[p + ".resample.1.bias"]
        return self.per_frame(x, lambda f: F.conv2d(F.interpolate(f, scale_factor=2.0, mode="nearest"), w, b,
                                                    padding=1))

    def run(self, lays, cache, x):
        for kind, p, _, _ in lays:
            if kind == "conv":
                x = self.causal(cache, p, x)
            elif kind == "res":
                x = self.res(cache, p, x)
            elif kind == "attn":
                x = self.attn(p, x)
            elif kind[:4] == "down":
                x = self.down(cache, p, x, kind == "down3d")
            elif kind[:2] == "up":
                x = self.up(cache, p, x, kind == "up3d")
            else:
                x = self.causal(cache, p + ".2", self.norm_silu(x, p + ".0.gamma"))
        return x

    # -- Wan's streaming encode / decode
    @torch.no_grad()
    def encode(self, video):
        """[B,3,1+4k,H,W] in [-1,1] -> normalised latent mean [B,z,1+k,H/8,W/8]."""
        video = video.to(torch.float32)
        k = (video.shape[2] - 1) // 4
        chunks = [video[:, :, :1]] + (list(video[:, :, 1:1 + 4 * k].split(4, 2)) if k else [])
        cache = {}
        h = torch.cat([self.run(self.enc, cache, c) for c in chunks], 2)
        mu = F.conv3d(h, self.W["conv1.weight"], self.W["conv1.bias"])[:, :self.cfg["z_dim"]]
        return (mu - self.mean) * (1.0 / self.std)

    @torch.no_grad()
    def decode(self, latents):
        """normalised latents [B,z,T,h,w] -> video [B,3,1+4(T-1),8h,8w], clamped to [-1,1]."""
        z = latents.to(torch.float32) / (1.0 / self.std) + self.mean
        x = F.conv3d(z, self.W["conv2.weight"], self.W["conv2.bias"])
        cache = {}
        return torch.cat([self.run(self.dec, cache, c) for c in x.split(1, 2)], 2).clamp_(-1.0, 1.0)


# ---------------------------------------------------------------------------------------------------------------
# FLOPs: 2 x multiply-adds of every conv (incl. 1x1x1, time and resample convs) and of the attention's qkv/proj
# projections and its two matmuls, walking the same layer list chunk by chunk with the shapes actually run.
# ---------------------------------------------------------------------------------------------------------------
def count_macs(lays, chunks_t, H, W):
    """lays: layer list; chunks_t: frames per chunk, in order. Returns (MACs, output frames, out H, out W)."""
    macs, started, t_out = 0, set(), 0
    for t0 in chunks_t:
        t, h, w = t0, H, W
        for kind, p, ci, co in lays:
            v = t * h * w
            if kind in ("conv", "head"):
                macs += v * ci * co * 27
            elif kind == "res":
                macs += v * (ci * co * 27 + co * co * 27 + (ci * co if ci != co else 0))
            elif kind == "attn":
                n = h * w
                macs += t * (n * ci * 3 * ci + 2 * n * n * ci + n * ci * ci)
            elif kind[:4] == "down":
                h, w = h // 2, w // 2
                macs += t * h * w * co * ci * 9
                if kind == "down3d":
                    if p in started:
                        t = (t + 1 - 3) // 2 + 1          # [previous frame, chunk], k=3, stride 2, no padding
                        macs += t * h * w * ci * ci * 3
                    started.add(p)
            elif kind[:2] == "up":
                if kind == "up3d":
                    if p in started:
                        macs += t * h * w * 2 * ci * ci * 3
                        t *= 2
                    started.add(p)
                h, w = 2 * h, 2 * w
                macs += t * h * w * co * ci * 9
        t_out += t
    return macs, t_out, h, w


def vae_flops(cfg, frames, H, W):
    """(encode FLOPs, decode FLOPs) for Wan's chunking of a [1,3,frames,H,W] clip (frames = 1 + 4k)."""
    k, z = (frames - 1) // 4, cfg["z_dim"]
    enc, t_lat, h, w = count_macs(layers(cfg, "encoder"), [1] + [4] * k, H, W)
    enc += t_lat * h * w * (2 * z) * (2 * z)                       # conv1, 1x1x1
    dec = t_lat * h * w * z * z                                    # conv2, 1x1x1
    dec += count_macs(layers(cfg, "decoder"), [1] * t_lat, h, w)[0]
    return 2 * enc, 2 * dec


# ---------------------------------------------------------------------------------------------------------------
def sgemm_gflops(n=2048, repeat=5):
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.matmul(a, b)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n ** 3 / best / 1e9


def make_video(frames, H, W, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (0.6 * torch.randn(1, 3, frames, H, W, generator=g)).clamp_(-1.0, 1.0)


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0   # Linux: KiB


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="64x64,480x832", help="comma-separated HxW, multiples of 8")
    ap.add_argument("--frames", type=int, default=5, help="1 + 4k frames")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        sizes = [tuple(int(v) for v in s.lower().split("x")) for s in a.sizes.split(",")]
    except ValueError:
        ap.error(f"bad --sizes {a.sizes!r}: expected HxW[,HxW...]")
    if any(len(s) != 2 or s[0] < 8 or s[1] < 8 or s[0] % 8 or s[1] % 8 for s in sizes):
        ap.error(f"bad --sizes {a.sizes!r}: H and W must be positive multiples of 8")
    if a.frames < 1 or (a.frames - 1) % 4:
        ap.error("--frames must be 1 + 4k")
    if a.threads < 1:
        ap.error("--threads must be >= 1")
    torch.set_num_threads(a.threads)

    cfg = DEFAULT
    t0 = time.perf_counter()
    vae = VAE(cfg, seed=a.seed)
    setup_s = time.perf_counter() - t0
    vae.decode(vae.encode(make_video(5, 16, 16, a.seed + 1)))             # warm-up: every code path, tiny clip
    sgemm = sgemm_gflops()

    rows = []
    for H, W in sizes:
        video = make_video(a.frames, H, W, a.seed + 1)
        t0 = time.perf_counter()
        lat = vae.encode(video)
        enc_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = vae.decode(lat)
        dec_s = time.perf_counter() - t0
        assert out.shape == video.shape and torch.isfinite(out).all()
        fe, fd = vae_flops(cfg, a.frames, H, W)
        row = dict(size=f"{H}x{W}", frames=a.frames, latents=list(lat.shape))
        for op, s, fl in (("encode", enc_s, fe), ("decode", dec_s, fd)):
            row[op] = dict(seconds=s, frames_per_s=a.frames / s, gflop=fl / 1e9, gflops=fl / 1e9 / s,
                           fraction_of_sgemm=fl / 1e9 / s / sgemm)
        row["peak_rss_mib"] = peak_rss_mib()
        rows.append(row)
        del video, lat, out

    info = dict(tool="bench/vae_torch.py", torch=torch.__version__, dtype="float32", device="cpu",
                threads=torch.get_num_threads(), config={k: cfg[k] for k in ("dim", "z_dim", "dim_mult",
                "num_res_blocks", "attn_scales", "temperal_downsample")}, params=vae.n_params(),
                weights_setup_s=setup_s, sgemm_gflops=sgemm, sgemm_shape="2048^3 best of 5", sizes=rows)
    if a.json:
        print(json.dumps(info))
        return 0
    print(f"vae_torch: Wan2.1 VAE (dim {cfg['dim']}, {vae.n_params() / 1e6:.1f} M params), PyTorch "
          f"{torch.__version__} float32 CPU, {info['threads']} threads; sgemm 2048^3 {sgemm:.1f} GFLOP/s")
    print(f"  {'size':>9} {'frames':>6} {'op':>6} {'seconds':>9} {'frames/s':>9} {'GFLOP':>9} {'GFLOP/s':>8} "
          f"{'of sgemm':>8} {'peak RSS':>10}")
    for r in rows:
        for op in ("encode", "decode"):
            m = r[op]
            print(f"  {r['size']:>9} {r['frames']:>6} {op:>6} {m['seconds']:>9.3f} {m['frames_per_s']:>9.2f} "
                  f"{m['gflop']:>9.2f} {m['gflops']:>8.2f} {m['fraction_of_sgemm']:>8.3f} "
                  f"{r['peak_rss_mib']:>6.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
