#!/usr/bin/python3
"""megaslide and PyTorch training the same model side by side, in alternating rounds (issue 34's harness).

Each round runs `megaslide bench train --json` and then bench/torch_train.py --json on the same config, clip shape
and batch, and prints both tokens/s; the last lines give each side's median and their ratio. Alternating keeps a
noisy machine's drift out of the ratio. Both sides call the same OpenBLAS, which picks its kernels from the CPU
unless OPENBLAS_CORETYPE names them: the environment given to this script reaches both. Not a test: it needs
Debian's python3-torch and ../shared/reference.

  /usr/bin/python3 bench/train_vs_torch.py --config configs/bench-dim256-dense.json --frames 4 --height 32 \\
      --width 32 --rounds 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=os.path.join(HERE, "../configs/bench-dim256-dense.json"))
    ap.add_argument("--frames", type=int, default=4)
    ap.add_argument("--height", type=int, default=32)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--megaslide", default=os.path.join(HERE, "../build/megaslide"))
    a = ap.parse_args()
    shape = ["--frames", str(a.frames), "--height", str(a.height), "--width", str(a.width), "--batch-size",
             str(a.batch_size), "--steps", str(a.steps)]
    ours, theirs = [], []
    for r in range(a.rounds):
        env_threads = {**os.environ, "OMP_NUM_THREADS": str(a.threads)}
        m = json.loads(subprocess.run([a.megaslide, "bench", "train", "--config", a.config, "--json"] + shape,
                                      check=True, capture_output=True, text=True, env=env_threads).stdout)
        t = run_json([sys.executable, os.path.join(HERE, "torch_train.py"), "--config", a.config, "--threads",
                      str(a.threads), "--json"] + shape)
        ours.append(m["tokens_per_second"])
        theirs.append(t["tokens_per_second"])
        print(f"round {r + 1}: megaslide {ours[-1]:8.1f} tokens/s ({m['fraction_of_sgemm']:.3f} of sgemm)   "
              f"PyTorch {theirs[-1]:8.1f} tokens/s", flush=True)
    mo, mt = statistics.median(ours), statistics.median(theirs)
    print(f"{a.config}: {m['tokens_per_step']} tokens/step, {a.threads} threads, {a.steps} steps a round, "
          f"torch {t['torch']}, OpenBLAS {m['sgemm_kernels']} kernels (OPENBLAS_CORETYPE, read by both sides)")
    print(f"median tokens/s: megaslide {mo:.1f}, PyTorch {mt:.1f}; megaslide / PyTorch = {mo / mt:.2f}")


if __name__ == "__main__":
    main()
