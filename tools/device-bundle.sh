#!/usr/bin/env bash
# tools/device-bundle.sh [BUILD_DIR] — run here, before tools/device-check.sh travels to a GPU machine (the device
# tool's `carry: [".device"]`). The GPU machine's image has CUDA, cuBLAS(Lt), cuDNN, NCCL and compute-sanitizer
# (its toolkit and Python's nvidia-* packages) but none of the Debian -dev packages megaslide builds against, so it
# runs what is built here: the lean GPU binaries (megaslide_device, megaslide_cuda_tests) for sm_90 with -lineinfo,
# the shared libraries they need beyond glibc, libstdc++ and CUDA's own, ptxas's resource report of every kernel
# (ptxas.txt), the test list and a manifest, in .device/ (git-ignored, at most 60 MiB). BUILD_DIR (default build)
# is configured Release with CUDA for sm_90, so CI's release build is reused as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
command -v nvcc >/dev/null || { echo "device-bundle: nvcc is not on the PATH; the bundle needs the CUDA build" >&2; exit 1; }
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMEGASLIDE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build "$build" -j2 --target megaslide_device megaslide_cuda_tests
rm -rf .device && mkdir -p .device/bin .device/lib
cp "$build/megaslide_device" "$build/megaslide_cuda_tests" .device/bin/
for lib in $(ldd .device/bin/* | awk '/=> \// {print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libstdc++.so* | libgcc_s.so* | libcublas*) ;;
    *) cp -L "$lib" .device/lib/ ;;
  esac
done
# The lean binaries need libgomp and libhwy (the CPU DSA kernels, which the CUDA tests' references run) alone
# beyond the system and CUDA libraries; anything else (OpenBLAS, FFmpeg) means a CUDA test or verb started linking
# a CPU path that pulls it in, and would fatten the carry.
extra=$(ls .device/lib | grep -v -e '^libgomp' -e '^libhwy' || true)
if [ -n "$extra" ]; then
  echo "device-bundle: the GPU binaries now need $(echo $extra) beyond libgomp and libhwy; keep them lean (docs/cuda.md)" >&2
  exit 1
fi
strip .device/bin/* # host symbols only: the kernels' line tables live in the fatbinary
# ptxas's report, one section per object (tools/ptxas-report.sh wrote it beside each when it was compiled).
reports=$(find "$build" -name '*.cu.o.ptxas.txt' | sort)
[ -n "$reports" ] || { echo "device-bundle: no ptxas reports in $build (the .cu objects predate tools/ptxas-report.sh: rebuild them)" >&2; exit 1; }
for f in $reports; do
  echo "== $(basename "$f" .cu.o.ptxas.txt).cu"
  cat "$f"
done | c++filt >.device/ptxas.txt # kernel names demangled
.device/bin/megaslide_cuda_tests --gtest_list_tests >.device/tests.txt
{
  echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) with $(nvcc --version | tail -1)"
  echo "kernels $(grep -c "Compiling entry function" .device/ptxas.txt), spilling $(grep -E -c "[1-9][0-9]* bytes spill (stores|loads)" .device/ptxas.txt)"
} >.device/manifest.txt
size=$(du -sb .device | cut -f1)
if [ "$size" -gt $((60 << 20)) ]; then
  echo "device-bundle: .device/ is $((size >> 20)) MiB, over its 60 MiB (the device tool carries 64 MiB in all)" >&2
  exit 1
fi
cat .device/manifest.txt
echo "device-bundle: .device/ ready, $((size >> 20)) MiB; carry it with the run (carry: [\".device\"])"
