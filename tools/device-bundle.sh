#!/usr/bin/env bash
# Run here, before tools/device-check.sh travels to a GPU machine (the device tool's `carry: [".device"]`):
# builds the lean GPU binaries (megaslide_device, megaslide_cuda_tests) for sm_90 in build/ and copies them,
# with the shared libraries they need beyond glibc, libstdc++ and the CUDA libraries that machine has, into
# .device/ (git-ignored). The GPU machine's image has CUDA and a compiler but none of the Debian -dev
# packages megaslide builds against, so it runs what was built here.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v nvcc >/dev/null || { echo "device-bundle: nvcc is not on the PATH; the bundle needs the CUDA build" >&2; exit 1; }
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMEGASLIDE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build build -j2 --target megaslide_device megaslide_cuda_tests
rm -rf .device && mkdir -p .device/bin .device/lib
cp build/megaslide_device build/megaslide_cuda_tests .device/bin/
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
strip .device/bin/* 2>/dev/null || true
du -sh .device
echo "device-bundle: .device/ ready; carry it with the run (carry: [\".device\"])"
