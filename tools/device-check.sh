#!/usr/bin/env bash
# tools/device-check.sh [--dry-run] DIR — on a machine with one H100/H200, from the .device/ bundle that
# tools/device-bundle.sh built on the development machine (the device tool's carry: [".device"]): first the inline-PTX
# wrappers against plain loops, then the CUDA tests against the CPU reference, each suite in its own process, a failing
# one rerun under compute-sanitizer; the streaming tests again with the host-synchronous wait; races sought in the
# flash tiles and the DSA halo; the GPU benchmarks, one flushed JSON line per measurement, with PyTorch's SDPA beside
# the attention rows (bench/sdpa_torch.py); attention at 32k tokens against float64. Every step is capped and the whole
# stays under 7 minutes on an H200, so a cut or broken step costs only itself. The table printed last is built from
# whatever exists and says what is missing and why. DIR receives device-check.log, summary.json (the table's data)
# and details.tgz (every step's log and report): three files, within what the device tool brings back.
# --dry-run: the same on a machine without a GPU: every CUDA test must report skipped, and every bench command line
# parse and stop at "no usable CUDA GPU".
set -uo pipefail
dry=0
if [ "${1:-}" = "--dry-run" ]; then
  dry=1
  shift
fi
out=${1:?usage: tools/device-check.sh [--dry-run] DIR}
cd "$(dirname "$0")/.."
bin=$PWD/.device/bin
if [ ! -x "$bin/megaslide_device" ] || [ ! -x "$bin/megaslide_cuda_tests" ]; then
  echo "device-check: no .device/ bundle here. Build it on the development machine with tools/device-bundle.sh and" \
    "carry it (the device tool's carry: [\".device\"]): the GPU machine lacks the packages megaslide builds against." >&2
  exit 2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$out/work
rm -rf "$work" "$out/details.tgz"
mkdir -p "$work/tests"
exec > >(tee "$out/device-check.log") 2>&1

export LD_LIBRARY_PATH="$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# cuBLASLt: the toolkit's, else the one in Python's nvidia-cublas package (KINDS.md: the image has both).
if ! ldconfig -p | grep -q libcublasLt.so.13; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
    $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, s, "lib") for p in nvidia.__path__ for s in ("cu13", "cublas")))' 2>/dev/null); do
    [ -e "$d/libcublasLt.so.13" ] && export LD_LIBRARY_PATH="$d:$LD_LIBRARY_PATH" && break
  done
fi
# NCCL (CudaNccl.OneRankOnTheRealLibrary; megaslide loads it only for distributed runs): the loader's, else the
# toolkit's, else Python's nvidia-nccl package.
if [ -z "${MEGASLIDE_NCCL_LIBRARY:-}" ] && ! ldconfig -p | grep -q libnccl.so.2; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib \
    $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, s, "lib") for p in nvidia.__path__ for s in ("nccl", "cu13")))' 2>/dev/null); do
    [ -e "$d/libnccl.so.2" ] && export MEGASLIDE_NCCL_LIBRARY="$d/libnccl.so.2" && break
  done
fi
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1 || true)
cat .device/manifest.txt 2>/dev/null
echo "bundle: $(du -sh .device | cut -f1); compute-sanitizer: ${sanitizer:-not found}; NCCL: ${MEGASLIDE_NCCL_LIBRARY:-$(ldconfig -p | grep -q libnccl.so.2 && echo libnccl.so.2 || echo not found)}"

budget=380 # seconds for every step; the table comes after
start=$SECONDS
# step NAME CAP CMD...: CMD under `timeout -k 5` of CAP seconds or what is left of the budget, its output in
# work/NAME.log; one line in work/steps.jsonl (rc, seconds, cap) and one on the console. Not run when under 5 s is left.
step() {
  local name=$1 cap=$2
  shift 2
  local left=$((budget - (SECONDS - start)))
  [ "$left" -lt "$cap" ] && cap=$left
  if [ "$cap" -lt 5 ]; then
    echo "{\"step\": \"$name\", \"rc\": null, \"seconds\": 0, \"cap\": 0}" >>"$work/steps.jsonl"
    printf '%5ds %-40s not run: the time budget is spent\n' $((SECONDS - start)) "$name"
    return 255
  fi
  local began=$SECONDS
  timeout -k 5 "$cap" "$@" >"$work/$name.log" 2>&1
  local rc=$?
  echo "{\"step\": \"$name\", \"rc\": $rc, \"seconds\": $((SECONDS - began)), \"cap\": $cap}" >>"$work/steps.jsonl"
  printf '%5ds %-40s exit %d after %ds (cap %ds)\n' $((SECONDS - start)) "$name" "$rc" $((SECONDS - began)) "$cap"
  return $rc
}
tests=("$bin/megaslide_cuda_tests") # not --gtest_brief: a hung suite's log then ends in the test it hung in

step nvidia-smi 10 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem --format=csv
step list-tests 15 "${tests[@]}" --gtest_list_tests # also shows at once whether the binaries start here
# First the inline-PTX wrappers against plain loops (mma.sync, ldmatrix, cp.async): the emulator and the tensor-core
# kernels could misread the ISA's fragment tables alike, and only the hardware tells.
step test-CudaPtx 20 "${tests[@]}" --gtest_filter='CudaPtx.*' --gtest_output="json:$work/tests/CudaPtx.json"
suites=$(grep -E '^[A-Za-z][A-Za-z0-9_]*\.$' "$work/list-tests.log" | tr -d '.' | grep -vE '^(CudaLargeShapes|CudaPtx)$')
memchecks=0
for suite in $suites; do
  step "test-$suite" 40 "${tests[@]}" --gtest_filter="$suite.*" --gtest_output="json:$work/tests/$suite.json"
  rc=$?
  # A CUDA error or a crash (not a timeout, not a plain failure) is rerun at once under memcheck, at most twice.
  if [ $dry -eq 0 ] && [ -n "$sanitizer" ] && [ $memchecks -lt 2 ] && [ $rc -ne 0 ] && [ $rc -ne 255 ] &&
    { grep -q "CUDA error" "$work/test-$suite.log" || { [ $rc -gt 128 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ]; }; }; then
    memchecks=$((memchecks + 1))
    step "memcheck-$suite" 90 "$sanitizer" --tool memcheck --error-exitcode 86 "${tests[@]}" \
      --gtest_filter="$suite.*"
  fi
done
# The streaming tests again with a device stream's wait on the CPU optimizer made by the enqueuing thread
# (MEGASLIDE_CUDA_HOST_WAIT=host-sync) instead of cuStreamWaitValue32 on mapped memory.
step test-host-sync 40 env MEGASLIDE_CUDA_HOST_WAIT=host-sync "${tests[@]}" --gtest_filter='CudaStreamed.*:CudaBackend.*' --gtest_output="json:$work/tests/host-sync.json"

# The benchmarks, one flushed JSON line per measurement. A dry run runs the same command lines: each must get past
# its argument parsing to the "no usable CUDA GPU" error.
bench() { # NAME CAP ARGS...
  local name=$1 cap=$2
  shift 2
  [ $dry -eq 1 ] && cap=10
  step "bench-$name" "$cap" "$bin/megaslide_device" bench cuda --json "$@"
}
[ $dry -eq 1 ] && step help-bench-cuda 10 "$bin/megaslide_device" bench cuda --help
# Ceilings (256 MiB copies, bf16 GEMMs at Wan2.1-14B shapes) and one Wan2.1-14B block at 8192 tokens.
bench ceilings 45 --copy-mib 256 --repeats 5 --stream-grid 0 0 0 --attention-tokens 0 --vae-clip 0 0 0 --t5-tokens 0
# Attention per type at Wan2.1's 480p and 720p token counts (81 frames: 32,760 and 75,600 tokens), one repeat, DSA
# first (tensor cores, staged, unstaged), dense at 32,760 only (the later runs measure their own GEMM ceiling on short
# copies: their TFLOP/s are compared with it); each row with its memory floor.
bench attention 90 --copy-mib 64 --repeats 1 --block-grid 0 0 0 --stream-grid 0 0 0 --attention-tokens 32760 75600 \
  --attention-dense-max 32768 --vae-clip 0 0 0 --t5-tokens 0
# The peer: PyTorch's scaled_dot_product_attention at the dense rows' shapes, in the same minutes on the same card.
sdpa_cap=40
[ $dry -eq 1 ] && sdpa_cap=10
step bench-sdpa $sdpa_cap python3 bench/sdpa_torch.py --tokens 32760 --repeats 3
# The streamed step: 4 Wan2.1-14B blocks at 6144 tokens, prefetch on, serialized, copies alone.
bench stream 75 --copy-mib 64 --repeats 2 --block-grid 0 0 0 --attention-tokens 0 --stream-grid 4 32 48 \
  --stream-layers 4 --vae-clip 0 0 0 --t5-tokens 0
# 4 Wan2.1-14B DSA blocks streamed at 75,600 tokens (720p, 81 frames), their MFU beside plan's prediction.
bench stream-dsa 75 --copy-mib 64 --repeats 1 --block-grid 0 0 0 --attention-tokens 0 --stream-grid 21 45 80 \
  --stream-layers 4 --stream-attention dsa --vae-clip 0 0 0 --t5-tokens 0
# The frozen models: Wan2.1's VAE encoding and decoding 5 x 480 x 832 pixels in fp32, umT5-XXL encoding 50 tokens.
bench models 75 --copy-mib 64 --repeats 2 --block-grid 0 0 0 --stream-grid 0 0 0 --attention-tokens 0 \
  --vae-clip 5 480 832 --t5-tokens 50
step test-CudaLargeShapes 90 "${tests[@]}" --gtest_filter='CudaLargeShapes.*' --gtest_output="json:$work/tests/CudaLargeShapes.json"
if [ $dry -eq 0 ] && [ -n "$sanitizer" ]; then
  step racecheck 90 "$sanitizer" --tool racecheck --racecheck-report hazard --error-exitcode 86 \
    "${tests[@]}" --gtest_filter='CudaAttention.FlashTilesMatchFloat64Loops:CudaDsa.HaloLargerThanTheStagingSpace:CudaDsa.TensorCoreForwardMatchesCpu:CudaPtx.*'
fi

python3 tools/device_check_table.py "$work" "$out" "$dry" "$sanitizer"
status=$?
tar czf "$out/details.tgz" -C "$out" work && rm -rf "$work"
exec >&- 2>&- # close the pipe to tee and wait for it, so that the log has the table too
wait
exit $status
