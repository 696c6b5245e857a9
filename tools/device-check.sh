#!/usr/bin/env bash
# tools/device-check.sh DIR — on a machine with one H100/H200: the CUDA tests against the CPU reference and
# the GPU benchmarks; the full log and a JSON summary go into DIR, a short table is printed last.
# Uses the binaries that tools/device-bundle.sh carried in .device/ when present, else builds for sm_90 here
# (which needs megaslide's build dependencies). Finishes in under 8 minutes: the tests are cut at 60 s, the
# benchmarks at 420 s.
set -uo pipefail
out=${1:?usage: tools/device-check.sh DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
exec > >(tee "$out/device-check.log") 2>&1

if [ -x .device/bin/megaslide_device ]; then
  bin=.device/bin
  export LD_LIBRARY_PATH="$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  echo "== building for sm_90 (no .device/ bundle) =="
  cmake --preset device >/dev/null && cmake --build --preset device -j"$(nproc)" --target megaslide_device megaslide_cuda_tests || exit 1
  bin=build-device
fi
# cuBLASLt: the toolkit's, else the one in Python's nvidia-cublas package.
if ! ldconfig -p | grep -q libcublasLt.so.13; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
    $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, s, "lib") for p in nvidia.__path__ for s in ("cu13", "cublas")))' 2>/dev/null); do
    [ -e "$d/libcublasLt.so.13" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" && break
  done
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv || true

echo "== CUDA tests (against the CPU reference) =="
# Cut at 60 s (its shapes are small: the CPU references dominate), so that a hung test cannot spend the session's
# device time; the log then shows which test ran last.
timeout 60 "$bin/megaslide_cuda_tests" --gtest_output="json:$out/cuda_tests.json"
tests_rc=$?
[ $tests_rc -eq 124 ] && echo "device-check: the CUDA tests ran past 60 s and were stopped (the last test started is above)"
echo "== bench cuda =="
# In four runs, each cut by a timeout so that the whole check stays under 8 minutes and the table below is printed
# whatever happens: the ceilings and one block; attention at 4k-32k tokens; attention at 128k (no dense: quadratic);
# streamed steps at 16384 tokens. The later runs measure the ceilings again on short copies (their own GEMM rate
# is what their TFLOP/s are compared with).
timeout 120 "$bin/megaslide_device" bench cuda --json --stream-grid 0 0 0 --attention-tokens 0 > "$out/bench_cuda.json"
bench_rc=$?
[ $bench_rc -eq 0 ] && cat "$out/bench_cuda.json"
short=(--json --copy-mib 64 --repeats 2 --block-grid 0 0 0 --stream-grid 0 0 0)
echo "== bench cuda: attention =="
timeout 100 "$bin/megaslide_device" bench cuda "${short[@]}" --attention-tokens 4096 16384 32768 > "$out/bench_attention.json"
attention_rc=$?
[ $attention_rc -eq 0 ] && cat "$out/bench_attention.json"
timeout 80 "$bin/megaslide_device" bench cuda "${short[@]}" --attention-tokens 131072 > "$out/bench_attention_128k.json"
[ $? -eq 0 ] && cat "$out/bench_attention_128k.json"
echo "== bench cuda: streamed steps =="
timeout 120 "$bin/megaslide_device" bench cuda --json --copy-mib 256 --repeats 2 --block-grid 0 0 0 \
  --attention-tokens 0 --stream-grid 8 32 64 --stream-layers 8 > "$out/bench_stream.json"
stream_rc=$?
[ $stream_rc -eq 0 ] && cat "$out/bench_stream.json"

python3 - "$out" "$tests_rc" "$bench_rc" "$stream_rc" "$attention_rc" <<'PY'
import json, os, sys
out, tests_rc, bench_rc, stream_rc, attention_rc = sys.argv[1], *map(int, sys.argv[2:6])
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except (OSError, ValueError):
        return None
tests, bench, streamed = load("cuda_tests.json"), load("bench_cuda.json"), load("bench_stream.json")
attention = [(r, run["gemm_tflops"]["square 8192"]) for run in (load("bench_attention.json"), load("bench_attention_128k.json"))
             if run for r in run.get("attention", [])]
rows, summary = [], {"tests_rc": tests_rc, "bench_rc": bench_rc, "stream_rc": stream_rc, "attention_rc": attention_rc,
                     "tests": [], "bench": bench, "stream": (streamed or {}).get("stream"),
                     "attention": [r for r, _ in attention]}
for suite in (tests or {}).get("testsuites", []):
    for t in suite.get("testsuite", []):
        status = "FAILED" if t.get("failures") else ("skipped" if t.get("result") == "SKIPPED" else "ok")
        errs = {k: v for k, v in t.items() if k not in ("name", "file", "line", "status", "result", "timestamp",
                                                           "time", "classname", "failures")}
        summary["tests"].append({"name": suite["name"] + "." + t["name"], "status": status, "errors": errs})
        rows.append((suite["name"] + "." + t["name"], status, " ".join(f"{k}={v}" for k, v in errs.items())))
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
print("\n== device-check summary ==")
print(f"{'test':55s} {'status':8s} rel. error vs CPU reference")
for name, status, errs in rows:
    print(f"{name:55s} {status:8s} {errs}")
if bench:
    print(f"\n{bench['device']}: copies of {bench['copy_bytes'] >> 20} MiB")
    for what, key, ceiling in [("pinned H2D (ceiling)", "pinned_h2d_gbps", None), ("pinned D2H (ceiling)", "pinned_d2h_gbps", None),
                               ("pinned both at once", "pinned_both_gbps", None),
                               ("runtime H2D", "runtime_h2d_gbps", "pinned_h2d_gbps"), ("runtime D2H", "runtime_d2h_gbps", "pinned_d2h_gbps"),
                               ("runtime both at once", "runtime_both_gbps", "pinned_both_gbps"), ("device copy (r+w)", "device_copy_gbps", None)]:
        ratio = f"  {bench[key] / bench[ceiling]:.3f} of ceiling" if ceiling else ""
        print(f"  {what:24s} {bench[key]:8.1f} GB/s{ratio}")
    for shape, tflops in bench["gemm_tflops"].items():
        print(f"  bf16 GEMM {shape:34s} {tflops:7.1f} TFLOP/s")
    b = bench.get("block")
    if b:
        print(f"  one block, Wan-14B shapes, {b['tokens']} tokens: forward {1e3 * b['forward_s']:.2f} ms, backward "
              f"{1e3 * b['backward_s']:.2f} ms; MFU {b['mfu']:.3f}; attention "
              f"{1e3 * b['attention_step_s']:.2f} ms of the step; GEMMs outside it at "
              f"{b['gemm_fraction_outside_attention']:.3f} of the square-8192 rate")
else:
    print(f"bench cuda failed (exit {bench_rc}); see device-check.log")
s = summary["stream"]
if s and bench:
    gib = float(1 << 30)
    print(f"  streamed step, {s['layers']} Wan-14B blocks, {s['tokens']} tokens: weights {s['weights_bytes'] / gib:.2f} GiB "
          f"in host memory, arena {s['arena_bytes'] / gib:.2f} GiB (plan {s['plan_bytes'] / gib:.2f}, budget "
          f"{s['budget_bytes'] / gib:.2f}), device memory in use {s['device_used_bytes'] / gib:.2f} GiB")
    print(f"    prefetch on {1e3 * s['step_s']:.1f} ms (MFU {s['mfu']:.3f}), serialized {1e3 * s['serialized_step_s']:.1f} ms "
          f"(MFU {s['serialized_mfu']:.3f}), copies alone {1e3 * s['copies_only_s']:.1f} ms; transfer hidden "
          f"{s['transfer_hidden']:.3f}; H2D {s['h2d_gbps_copies_only']:.1f} GB/s = "
          f"{s['h2d_gbps_copies_only'] / bench['pinned_h2d_gbps']:.3f} of the pinned ceiling")
else:
    print(f"streamed-step bench failed (exit {stream_rc}); see device-check.log")
if attention:
    print("  self-attention, 40 heads of 128, window 3x3x3 (forward+backward; TFLOP/s against the same run's GEMM rate)")
    step = {(r["type"], r["tokens"]): r["forward_s"] + r["backward_s"] for r, _ in attention}
    for r, ceiling in attention:
        L, t = r["tokens"], step[(r["type"], r["tokens"])]
        vs = [f"{t / step[(o, L)]:.3f}x the time of {o}" for o in ("dense", "dsa_fixed", "dsa_unstaged")
              if r["type"] == "dsa" and (o, L) in step]
        dense = max((n for o, n in step if o == "dense"), default=0)
        if r["type"] == "dsa" and ("dense", L) not in step and dense:  # dense's quadratic cost from its largest run
            vs.insert(0, f"{t / (step[('dense', dense)] * (L / dense) ** 2):.3f}x the time of dense extrapolated "
                         f"quadratically from {dense} tokens")
        print(f"    {r['type']:12s} {L:7d} tokens: forward {1e3 * r['forward_s']:9.2f} ms ({r['forward_tflops']:6.1f} TFLOP/s, "
              f"{r['forward_tflops'] / ceiling:.3f} of GEMM), backward {1e3 * r['backward_s']:9.2f} ms; {'; '.join(vs)}")
else:
    print(f"attention bench failed (exit {attention_rc}); see device-check.log")
PY
status=1
[ $tests_rc -eq 0 ] && [ $bench_rc -eq 0 ] && [ $stream_rc -eq 0 ] && [ $attention_rc -eq 0 ] && status=0
exec >&- 2>&-  # close the pipe to tee and wait for it, so that the log has the table too
wait
exit $status
