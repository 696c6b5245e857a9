#!/usr/bin/python3
"""The umT5-XXL encoder in PyTorch float32 on the CPU: the peer that `megaslide bench t5` is compared with.

Not a test and not part of the build: it needs only Debian's python3-torch (1.13). It is a compact float32
implementation of the semantics in shared/reference/t5_ref.py (T5 RMS norm eps 1e-6, unscaled attention plus each
layer's bucketed relative-position bias, fc2(fc1(x) * gelu_tanh(gate(x))), final norm) with random weights at the
real width. The whole encoder in float32 is ~23 GB and does not fit a 24 GiB machine, so --layers (default 2)
real-width layers run and the time is scaled to 24; the token embedding (a row gather) is left out of both.

For each prompt length L it times the forward (torch.no_grad, best of 3 after a warm-up) and reports seconds for the
layers run and scaled to 24, GFLOP (2 x the multiply-adds of the projections, the FFN and attention's two matmuls,
as megaslide's t5_encode_flops counts them), GFLOP/s, its ratio to a float32 sgemm ceiling (torch.matmul 2048^3,
best of 5, same run) and peak RSS (getrusage ru_maxrss).

  /usr/bin/python3 bench/t5_torch.py [--tokens 50,200] [--layers 2] [--threads N] [--json]
"""
import argparse
import json
import math
import resource
import time

import torch

DIM, DIM_ATTN, DIM_FFN, HEADS, BUCKETS, LAYERS = 4096, 4096, 10240, 64, 32, 24


def bucket(rel, num_buckets=BUCKETS, max_dist=128):
    half = num_buckets // 2
    base = (rel > 0).long() * half
    n = rel.abs()
    exact = half // 2
    far = exact + (torch.log(n.clamp(min=1).float() / exact) / math.log(max_dist / exact) * (half - exact)).long()
    return base + torch.where(n < exact, n, far.clamp(max=half - 1))


def rms(x, w):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


def layer(x, p, bias):
    L = x.shape[0]
    h = rms(x, p["norm1"])
    q, k, v = (h @ p[n].T for n in "qkv")
    q, k, v = (t.view(L, HEADS, -1).transpose(0, 1) for t in (q, k, v))  # [H, L, c]
    a = torch.softmax(q @ k.transpose(1, 2) + bias, dim=-1)
    x = x + (a @ v).transpose(0, 1).reshape(L, DIM_ATTN) @ p["o"].T
    h = rms(x, p["norm2"])
    g = torch.nn.functional.gelu(h @ p["gate"].T, approximate="tanh") * (h @ p["fc1"].T)
    return x + g @ p["fc2"].T


def flops(L):
    return LAYERS * (2 * L * (4 * DIM * DIM_ATTN + 3 * DIM * DIM_FFN) + 4 * L * L * DIM_ATTN)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", default="50,200")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    m = torch.randn(2048, 2048, generator=g)
    best = 1e30
    for _ in range(5):
        t = time.perf_counter()
        m @ m
        best = min(best, time.perf_counter() - t)
    sgemm = 2 * 2048 ** 3 / best
    params = []
    for _ in range(a.layers):
        p = {n: torch.randn(DIM_ATTN, DIM, generator=g) * DIM ** -0.5 for n in "qkv"}
        p["o"] = torch.randn(DIM, DIM_ATTN, generator=g) * DIM_ATTN ** -0.5
        p["gate"] = torch.randn(DIM_FFN, DIM, generator=g) * DIM ** -0.5
        p["fc1"] = torch.randn(DIM_FFN, DIM, generator=g) * DIM ** -0.5
        p["fc2"] = torch.randn(DIM, DIM_FFN, generator=g) * DIM_FFN ** -0.5
        p["norm1"], p["norm2"] = torch.ones(DIM), torch.ones(DIM)
        p["table"] = torch.randn(BUCKETS, HEADS, generator=g)
        params.append(p)
    out = {"threads": torch.get_num_threads(), "layers_run": a.layers, "sgemm_gflops": sgemm / 1e9, "prompts": []}
    if not a.json:
        print(f"PyTorch {torch.__version__} float32, {a.layers} real-width umT5 layers scaled to {LAYERS}; "
              f"{torch.get_num_threads()} threads, sgemm 2048^3 {sgemm / 1e9:.1f} GFLOP/s")
    with torch.no_grad():
        for L in (int(t) for t in a.tokens.split(",")):
            x0 = torch.randn(L, DIM, generator=g)
            pos = torch.arange(L)
            b = bucket(pos[None, :] - pos[:, None])

            def run():
                x = x0
                for p in params:
                    x = layer(x, p, p["table"][b].permute(2, 0, 1))
                return x

            run()
            best = 1e30
            for _ in range(3):
                t = time.perf_counter()
                run()
                best = min(best, time.perf_counter() - t)
            scaled = best * LAYERS / a.layers
            f = flops(L)
            row = {"tokens": L, "seconds_layers_run": best, "seconds_24_layers": scaled, "gflop": f / 1e9,
                   "gflops": f / scaled / 1e9, "fraction_of_sgemm": f / scaled / sgemm}
            out["prompts"].append(row)
            if not a.json:
                print(f"{L:4d} tokens: {best:.3f} s for {a.layers} layers, {scaled:.2f} s scaled to {LAYERS}, "
                      f"{f / 1e9:.1f} GFLOP, {f / scaled / 1e9:.1f} GFLOP/s, {f / scaled / sgemm:.3f} of sgemm")
    out["peak_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(out) if a.json else f"peak memory {out['peak_bytes'] / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
