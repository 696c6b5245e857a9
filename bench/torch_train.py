#!/usr/bin/python3
"""The peer of `megaslide bench train`: the same Wan2.1-style model trained in float32 PyTorch on the CPU.

Not a test and not part of the build: it needs Debian's python3-torch (1.13) and the float64 specification
../shared/reference/wan_ref.py (imported from --reference-dir and run in float32: its dense attention is PyTorch's
two large matmuls per head with a materialised softmax, its DSA the grid-sample formulation of dsa_ref.py).

Each step is what megaslide's trainer does on synthetic data: a batch of --batch-size clips of random pixels at
--frames x --height x --width, a random timestep per clip, the rectified-flow input x_t = (1 - t) x0 + t noise and
target noise - x0, a random context [B, text_len, text_dim], the forward, the MSE loss, the backward and
torch.optim.AdamW (lr 2e-3, megaslide's default betas, eps and weight decay). Tokens/s counts every step of the run
(the first included, as megaslide's own count does), over F x H/2 x W/2 tokens per clip.

  /usr/bin/python3 bench/torch_train.py --config configs/bench-dim256-dense.json --frames 4 --height 32 --width 32
"""
import argparse
import json
import os
import sys
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="the model's config.json (configs/bench-dim256-dense.json)")
    ap.add_argument("--frames", type=int, default=6)
    ap.add_argument("--height", type=int, default=24)
    ap.add_argument("--width", type=int, default=24)
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--reference-dir", default=os.path.join(os.path.dirname(__file__), "../../shared/reference"))
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()
    sys.path.insert(0, a.reference_dir)
    import wan_ref  # noqa: E402  (the specification, run in float32)

    wan_ref.D = torch.float32
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    with open(a.config) as f:
        cfg = json.load(f)
    cfg.setdefault("patch_size", [1, 2, 2])
    if cfg.get("attention", {}).get("type") == "dsa" and not cfg["attention"].get("offset_groups"):
        cfg["attention"]["offset_groups"] = cfg["num_heads"]  # megaslide's 0: one group per head
    W = wan_ref.random_weights(cfg, seed=0)
    params = [w.requires_grad_() for w in W.values()]
    opt = torch.optim.AdamW(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    B, F, H, Wd = a.batch_size, a.frames, a.height, a.width
    pt, ph, pw = cfg["patch_size"]
    tokens = B * (F // pt) * (H // ph) * (Wd // pw)
    start = time.perf_counter()
    for _ in range(a.steps):
        x0 = torch.rand(B, cfg["in_dim"], F, H, Wd) * 2 - 1
        noise = torch.randn_like(x0)
        t = torch.rand(B)
        xt = (1 - t.view(B, 1, 1, 1, 1)) * x0 + t.view(B, 1, 1, 1, 1) * noise
        ctx = torch.randn(B, cfg["text_len"], cfg["text_dim"])
        loss = torch.nn.functional.mse_loss(wan_ref.forward(W, cfg, xt, t * 1000, ctx), noise - x0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    secs = time.perf_counter() - start
    r = {"config": a.config, "attention": cfg.get("attention", {}).get("type", "dense"), "tokens_per_step": tokens,
         "steps": a.steps, "threads": a.threads, "seconds": secs, "tokens_per_second": tokens * a.steps / secs,
         "torch": torch.__version__}
    if a.json:
        print(json.dumps(r))
    else:
        print(f"torch train: {a.config} ({r['attention']} attention, {tokens} tokens/step, {a.threads} threads, "
              f"{a.steps} steps): {r['tokens_per_second']:.0f} tokens/s")


if __name__ == "__main__":
    main()
