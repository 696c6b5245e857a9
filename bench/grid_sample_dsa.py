#!/usr/bin/python3
"""DSA written with PyTorch's generic grid_sample, timed forward + backward: the baseline that
`megaslide bench attention`'s dsa row is compared with (docs/benchmarks.md, issue 3's 20x target).

Not a test and not part of the build: it needs PyTorch (Debian: apt-get install python3-torch).
Two variants of the same operator:
  reference  the float64 specification's own code (../shared/reference/dsa_ref.py, imported from
             --reference-dir, run in float32): one grid_sample per head for K and for V.
  batched    written here for speed: every head in one grid_sample call (heads folded into the batch),
             masked softmax, one einsum each way.
Shape and settings match the bench's dsa row: batch 1, 4 heads x 32 dims, window 3x3x3, one offset
group per head, offsets uniform in [-1.5, 1.5], float32, --threads threads, best of --repeat.

  /usr/bin/python3 bench/grid_sample_dsa.py --grid 8,32,32 --variant batched
"""
import argparse
import sys
import time

import torch
import torch.nn.functional as F


def window_start(E, k):  # per-axis start of each token's window: clamp(i - k'//2, 0, E - k')
    k = min(k, E)
    return torch.clamp(torch.arange(E) - k // 2, 0, E - k), k


def dsa_batched(q, k, v, off, window):
    """q, k, v [T, H, W, nh, d]; off [T, H, W, nh, P, 3] in token units. Returns [T, H, W, nh, d]."""
    T, H, W, nh, d = q.shape
    P = off.shape[4]
    ext = (T, H, W)
    axes = [window_start(E, kw) for E, kw in zip(ext, window)]
    j = torch.stack(torch.meshgrid(*[torch.arange(kw) for kw in window], indexing="ij"), -1).reshape(P, 3)
    valid = (j < torch.tensor([a[1] for a in axes])).all(-1)  # [P]
    starts = torch.stack(torch.meshgrid(*[a[0] for a in axes], indexing="ij"), -1)  # [T, H, W, 3]
    pos = starts[:, :, :, None, None, :] + j[None, None, None, None] + off  # [T, H, W, nh, P, 3]
    scale = torch.tensor([max(E - 1, 1) for E in ext], dtype=q.dtype)
    grid = (2 * pos / scale - 1)[..., [2, 1, 0]]  # grid_sample wants (x=w, y=h, z=t)
    grid = grid.permute(3, 0, 1, 2, 4, 5).reshape(nh, T * H * W, P, 1, 3)
    def sample(x):  # [T, H, W, nh, d] -> [nh, N, P, d]
        vol = x.permute(3, 4, 0, 1, 2)  # [nh, d, T, H, W]
        s = F.grid_sample(vol, grid, mode="bilinear", padding_mode="border", align_corners=True)
        return s.squeeze(-1).permute(0, 2, 3, 1)
    ks, vs = sample(k), sample(v)
    qq = q.permute(3, 0, 1, 2, 4).reshape(nh, T * H * W, d)
    logits = torch.einsum("nld,nlpd->nlp", qq, ks) / d**0.5
    a = torch.softmax(logits.masked_fill(~valid, float("-inf")), -1)
    out = torch.einsum("nlp,nlpd->nld", a, vs)
    return out.reshape(nh, T, H, W, d).permute(1, 2, 3, 0, 4)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", default="8,32,32", help="T,H,W")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--variant", choices=["reference", "batched"], default="batched")
    ap.add_argument("--reference-dir", default="../shared/reference")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    T, H, W = (int(x) for x in a.grid.split(","))
    nh, d, win = a.heads, a.head_dim, (3, 3, 3)
    q, k, v = (torch.randn(T, H, W, nh, d, requires_grad=True) for _ in range(3))
    off = (torch.rand(T, H, W, nh, 27, 3) * 3 - 1.5).requires_grad_()
    g = torch.randn(T, H, W, nh, d)
    if a.variant == "reference":
        sys.path.insert(0, a.reference_dir)
        from dsa_ref import dsa_ref
        op = lambda: dsa_ref(q[None], k[None], v[None], off[None], win)[0]
    else:
        op = lambda: dsa_batched(q, k, v, off, win)
    best = float("inf")
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        (op() * g).sum().backward()
        best = min(best, time.perf_counter() - t0)
    print(f"grid_sample dsa ({a.variant}) fwd+bwd {T}x{H}x{W} = {T * H * W} tokens, {nh} heads x {d}, window 3x3x3: "
          f"{best:.3f} s (best of {a.repeat}, {a.threads} threads, torch {torch.__version__})")


if __name__ == "__main__":
    main()
