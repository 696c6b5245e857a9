#!/usr/bin/env python3
"""tools/device_check_table.py WORK OUT DRY SANITIZER: the table that tools/device-check.sh prints last, from whatever
its steps left in WORK (steps.jsonl, tests/*.json gtest reports, bench-*.log JSON lines, the sanitizers' logs); writes
OUT/summary.json; exits 0 only when nothing failed or is missing (a dry run: when every CUDA test reported skipped)."""
import glob, json, os, re, sys
work, out, dry, sanitizer = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]

def lines(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip().startswith("{")]
    except (OSError, ValueError):
        return []

def text(name):
    try:
        return open(os.path.join(work, name + ".log"), errors="replace").read()
    except OSError:
        return ""

steps = {s["step"]: s for s in lines(os.path.join(work, "steps.jsonl"))}
def why(name):  # why a step left nothing, or None when it ran to the end
    s = steps.get(name)
    if s is None: return "not run"
    if s["rc"] is None: return "not run: the check's time budget was spent"
    if s["rc"] in (124, 137): return f"cut by its {s['cap']} s cap"
    if s["rc"] != 0: return f"exit {s['rc']}"
    return None

summary = {"dry_run": dry, "steps": list(steps.values()), "tests": [], "bench": [], "sanitizers": {}, "missing": []}
print("\n== device-check summary ==")
# Tests: per suite, and per test its errors against the CPU reference (the properties the tests record).
print(f"{'CUDA test':58s} {'status':8s} error against the reference")
counts = {}
for path in sorted(glob.glob(os.path.join(work, "tests", "*.json"))):
    run = os.path.basename(path)[:-5]
    try:
        report = json.load(open(path))
    except (OSError, ValueError):
        continue
    for suite in report.get("testsuites", []):
        for t in suite.get("testsuite", []):
            status = "FAILED" if t.get("failures") else ("skipped" if t.get("result") == "SKIPPED" else "passed")
            props = {k: v for k, v in t.items() if k not in ("name", "file", "line", "status", "result", "timestamp",
                                                               "time", "classname", "failures")}
            name = suite["name"] + "." + t["name"] + (" (host-sync)" if run == "host-sync" else "")
            counts[status] = counts.get(status, 0) + 1
            summary["tests"].append({"name": name, "status": status, "properties": props,
                                     "failures": [f.get("failure", "")[:400] for f in t.get("failures", [])]})
            if dry and status == "skipped":
                continue  # the dry run lists only what did not skip
            print(f"{name:58s} {status:8s} " + " ".join(f"{k}={v}" for k, v in props.items()))
            for f in t.get("failures", [])[:3]:
                print("      " + " | ".join(f.get("failure", "").splitlines())[:200])
# Every step that did not run to its end, with why and its last line (a crash, a missing library, the test it hung in).
for name in steps:
    if why(name) and not name.startswith(("memcheck-", "racecheck")) and not (dry and name == "nvidia-smi") and \
            not (dry and name.startswith("bench-") and "no usable CUDA GPU" in text(name)):
        log = [l for l in text(name).strip().splitlines() if not l.startswith("{")]  # not a bench's JSON lines
        summary["missing"].append({"step": name, "why": why(name), "last": log[-1][:200] if log else ""})
        report = name.startswith("test-") and not os.path.exists(os.path.join(work, "tests", name[5:] + ".json"))
        print(f"  {name}: {why(name)}" + ("; no JSON report (it did not finish)" if report else "") +
              (f"; last line: {log[-1][:150]}" if log else ""))
print("tests: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))

# Sanitizers: their summaries, or why they said nothing.
for name in sorted(n for n in steps if n.startswith(("memcheck-", "racecheck"))):
    log = text(name)
    m = re.findall(r"(ERROR SUMMARY: .*|RACECHECK SUMMARY: .*)", log)
    refused = re.search(r"(Device not supported.*|not supported on this.*|error 999.*)", log)
    verdict = m[-1] if m else (f"refused by this machine: {refused.group(1)[:120]}" if refused else (why(name) or "no summary"))
    summary["sanitizers"][name] = verdict
    print(f"{name}: {verdict}")
if not dry and not sanitizer:
    print("compute-sanitizer: not found on this machine (memcheck and racecheck not run)")

if dry:
    for name in sorted(n for n in steps if n.startswith(("help-", "bench-"))):
        verdict = why(name) or "ok"
        if name.startswith("bench-") and "no usable CUDA GPU" in text(name):
            verdict = "its arguments parse; stopped at \"no usable CUDA GPU\" as it should here"
        print(f"{name}: {verdict}")
    skipped_only = all(t["status"] == "skipped" for t in summary["tests"]) and summary["tests"]
    print("dry run: " + ("every CUDA test reported skipped" if skipped_only else "SOME CUDA TEST DID NOT REPORT SKIPPED"))
    summary["dry_run_ok"] = bool(skipped_only) and not summary["missing"]
else:
    bench = {k: lines(os.path.join(work, f"bench-{k}.log"))
             for k in ("ceilings", "attention", "sdpa", "stream", "stream-dsa", "models")}
    summary["bench"] = bench
    for k, rows in bench.items():
        if why(f"bench-{k}") or not any(r["measure"] == "done" for r in rows):
            have = sorted({r["measure"] for r in rows} - {"done"})
            if not why(f"bench-{k}"):
                summary["missing"].append({"step": f"bench-{k}", "why": "no end line", "last": ""})
            print(f"  bench-{k} measured {', '.join(have) or 'nothing'} before it stopped")
    c = bench["ceilings"]
    copies = {r["what"]: r["gbps"] for r in c if r["measure"] == "copy"}
    device = next((r for r in c if r["measure"] == "device"), None)
    if device:
        print(f"\n{device['device']}, {device['multiprocessors']} SMs, {device['memory_bytes'] / 2**30:.1f} GiB; "
              f"copies of {device['copy_bytes'] >> 20} MiB")
    for what, key, ceiling in [("pinned H2D (ceiling)", "pinned_h2d_gbps", None), ("pinned D2H (ceiling)", "pinned_d2h_gbps", None),
                               ("pinned both at once", "pinned_both_gbps", None),
                               ("runtime H2D", "runtime_h2d_gbps", "pinned_h2d_gbps"), ("runtime D2H", "runtime_d2h_gbps", "pinned_d2h_gbps"),
                               ("runtime both at once", "runtime_both_gbps", "pinned_both_gbps"), ("HBM copy (r+w)", "device_copy_gbps", None)]:
        if key in copies:
            ratio = f"  {copies[key] / copies[ceiling]:.3f} of the pinned ceiling" if ceiling in copies else ""
            print(f"  {what:24s} {copies[key]:8.1f} GB/s{ratio}")
    for r in c:
        if r["measure"] == "gemm":
            print(f"  bf16 GEMM {r['shape']:34s} {r['tflops']:7.1f} TFLOP/s")
    for b in (r for r in c if r["measure"] == "block"):
        print(f"  one Wan2.1-14B block, {b['tokens']} tokens: forward {1e3 * b['forward_s']:.2f} ms, backward "
              f"{1e3 * b['backward_s']:.2f} ms; MFU {b['mfu']:.3f}; attention {1e3 * b['attention_step_s']:.2f} ms of "
              f"the step; GEMMs outside it at {b['gemm_fraction_outside_attention']:.3f} of the square-8192 rate")
    for s in (r for r in bench["stream"] + bench["stream-dsa"] if r["measure"] == "stream"):
        gib = float(2**30)
        print(f"  streamed step, {s['layers']} Wan2.1-14B blocks ({s.get('attention', 'dense')}), {s['tokens']} tokens: prefetch on "
              f"{1e3 * s['step_s']:.1f} ms (MFU {s['mfu']:.3f}), off {1e3 * s['serialized_step_s']:.1f} ms (MFU "
              f"{s['serialized_mfu']:.3f}), copies alone {1e3 * s['copies_only_s']:.1f} ms; transfer hidden "
              f"{s['transfer_hidden']:.3f}; H2D {s['h2d_gbps_copies_only']:.1f} GB/s = "
              f"{s['h2d_gbps_copies_only'] / s['pinned_h2d_gbps']:.3f} of that run's pinned ceiling")
        print(f"    device memory in use {s['device_used_bytes'] / gib:.2f} GiB: arena {s['arena_bytes'] / gib:.2f} GiB "
              f"against plan {s['plan_bytes'] / gib:.2f} GiB and budget {s['budget_bytes'] / gib:.2f} GiB")
        if "plan_mfu" in s:
            print(f"    model FLOPs' MFU at the {s['plan_profile']} peak {s['model_mfu']:.3f}; plan predicts "
                  f"{s['plan_mfu']:.3f} ({s['plan_step_s']:.2f} s a step, its default kernel rates)")
        if "forward_resident_s" in s:
            print(f"    sampling's forward alone: {'every stage resident' if s['forward_all_resident'] else 'NOT resident'} "
                  f"{1e3 * s['forward_resident_s']:.1f} ms (MFU {s['forward_resident_mfu']:.3f}), two slots streamed "
                  f"{1e3 * s['forward_streamed_s']:.1f} ms (MFU {s['forward_streamed_mfu']:.3f})")
    for v in (r for r in bench["models"] if r["measure"] == "vae"):
        print(f"  VAE (Wan2.1's, fp32), {v['frames']} x {v['height']} x {v['width']} pixels: encode {v['encode_s']:.3f} s "
              f"({v['encode_tflops']:.1f} TFLOP/s, {v['encode_fraction_of_fp32_gemm']:.3f} of the fp32 GEMM's "
              f"{v['fp32_gemm_tflops']:.1f}), decode {v['decode_s']:.3f} s ({v['decode_tflops']:.1f} TFLOP/s, "
              f"{v['decode_fraction_of_fp32_gemm']:.3f}); device memory {v['device_used_bytes'] / 2**30:.2f} GiB")
    for t in (r for r in bench["models"] if r["measure"] == "t5"):
        print(f"  text encoder (umT5-XXL, bf16), {t['tokens']} tokens: {1e3 * t['encode_s']:.1f} ms ({t['tflops']:.1f} "
              f"TFLOP/s, {t['fraction_of_bf16_gemm']:.3f} of the bf16 GEMM's {t['bf16_gemm_tflops']:.1f}); weights "
              f"uploaded in {t['upload_s']:.1f} s")
    rows = [r for r in bench["attention"] if r["measure"] == "attention"]
    if rows:
        print("  self-attention, 40 heads of 128 (forward; forward + backward), TFLOP/s and share of the same run's GEMM rate")
        for r in rows:
            floor = f", memory floor at {r['floor_gbps']:.0f} GB/s" if "floor_gbps" in r else ""
            print(f"    {r['type']:12s} {r['tokens']:6d} tokens: forward {1e3 * r['forward_s']:8.2f} ms "
                  f"{r['forward_tflops']:6.1f} ({r['forward_tflops'] / r['gemm_tflops']:.3f}), backward "
                  f"{1e3 * r['backward_s']:8.2f} ms, step {r['step_tflops']:6.1f} TFLOP/s ({r['step_tflops'] / r['gemm_tflops']:.3f})"
                  f"{floor}")
    own = {r["tokens"]: r for r in rows if r["type"] == "dense"}
    for p in (r for r in bench["sdpa"] if r["measure"] == "attention_peer"):
        mine = own.get(p["tokens"])
        ratio = (f"; own dense at {mine['forward_tflops'] / p['forward_tflops']:.3f} (forward) and "
                 f"{mine['step_tflops'] / p['step_tflops']:.3f} (step) of it") if mine else ""
        print(f"    {p['peer']:12s} {p['tokens']:6d} tokens: forward {1e3 * p['forward_s']:8.2f} ms "
              f"{p['forward_tflops']:6.1f}, backward {1e3 * p['backward_s']:8.2f} ms, step {p['step_tflops']:6.1f} "
              f"TFLOP/s{ratio}")
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
ok = all(t["status"] != "FAILED" for t in summary["tests"]) and not summary["missing"] and \
     all(v.startswith(("ERROR SUMMARY: 0 ", "RACECHECK SUMMARY: 0 ")) for v in summary["sanitizers"].values())
if dry: ok = summary["dry_run_ok"]
sys.exit(0 if ok else 1)
