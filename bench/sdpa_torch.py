#!/usr/bin/python3
"""PyTorch's scaled_dot_product_attention on the GPU: the peer of `megaslide bench cuda`'s dense attention rows.

Not a test and not part of the build: the device check (tools/device-check.sh) runs it on the GPU machine's image,
whose PyTorch has CUDA, right after `bench cuda --attention-tokens ...`, so both are timed in the same minutes on the
same card. Same shapes and FLOP count as bench_cuda_attention.cpp: one sample, --heads heads of --head-dim channels,
L tokens, bf16; forward FLOPs 4 L^2 (heads x head dim); the step (forward + backward) counted as 3.5 forwards.
Forward timed alone, then the backward of a kept forward (CUDA events, a warm-up first, the fastest of --repeats).
Prints one JSON line per token count: {"measure": "attention_peer", "peer": "torch sdpa <backend>", ...}; without a
usable GPU it prints "no usable CUDA GPU" and exits 2, as the bench verbs do.

  python3 bench/sdpa_torch.py [--tokens 4096 32768] [--heads 40] [--head-dim 128] [--repeats 3]
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[4096, 32768])
    ap.add_argument("--heads", type=int, default=40)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(f"no usable CUDA GPU (PyTorch: {e})")
        return 2
    if not torch.cuda.is_available():
        print("no usable CUDA GPU (torch.cuda.is_available() is false)")
        return 2

    def timed(fn):
        fn()
        best = float("inf")
        for _ in range(a.repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / 1e3)
        return best

    device = torch.cuda.get_device_name()
    for L in a.tokens:
        shape = (1, a.heads, L, a.head_dim)
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        dout = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            forward = timed(lambda: F.scaled_dot_product_attention(q, k, v))
        out = F.scaled_dot_product_attention(q, k, v)
        backward = timed(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
        flops = 4.0 * L * L * a.heads * a.head_dim
        print(json.dumps({"measure": "attention_peer", "peer": f"torch {torch.__version__} sdpa", "device": device,
                          "tokens": L, "heads": a.heads, "head_dim": a.head_dim, "forward_s": forward,
                          "backward_s": backward, "forward_tflops": flops / forward / 1e12,
                          "step_tflops": 3.5 * flops / (forward + backward) / 1e12}), flush=True)
        del q, k, v, dout, out
        torch.cuda.empty_cache()
    print(json.dumps({"measure": "done"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
