#!/usr/bin/env bash
# tools/cuda-emu/run.sh [GTEST_FILTER | smoke] — runs the CUDA tests on the CPU, without a GPU: every CUDA kernel
# (src/backend/cuda/*.cu, translated by translate.py) on an emulation of the CUDA subset they use (include/:
# a block's threads are OS threads, __syncthreads and the warp intrinsics barriers, WMMA tiles computed in
# fp32, cuBLASLt from its documented semantics, streams as threads running their work in order), against the
# tests' CPU and float64 references. It checks the kernels' and the backend's logic (indexing, reductions, tiling,
# masks, the GEMM mapping, event and stream ordering), not speed, resource limits (shared memory, registers) or
# what real hardware reorders. Slow (a thread per CUDA thread): seconds to minutes per test. The default filter leaves
# out the 32k-token tests (tests/cuda/test_large_shapes.cpp: hours here); `smoke` runs every op's forward and
# backward once at small odd shapes (CI runs it: docs/cuda.md). Needs a CPU-only build of megaslide's layer libraries
# in $CPU_BUILD (default build-cpu, made here if missing); works in build-cuda-emu/ (build-cuda-emu-NAME for another
# CPU_BUILD). A CPU build with the sanitizers (the asan preset) makes the emulated kernels build and run under them
# too: an out-of-bounds read in a kernel is then a heap overflow ASan reports.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD cpu=${CPU_BUILD:-build-cpu} out=build-cuda-emu
[ "$cpu" = build-cpu ] || out=build-cuda-emu-$(basename "$cpu")
# The smoke set: each op's forward and backward once (the layers, the norms, the three attention types, DSA and its
# offset network, a whole block of each attention type, the VAE's and the text encoder's kernels).
smoke='CudaLayers.*:CudaOps.*:CudaAttention.SelfAttentionMatchesFloat64Loops:CudaAttention.WindowMatchesMaskedFloat64Loops'
smoke+=':CudaDsa.MatchesCpuWithGroupsAndOffsetsPastTheBorders:CudaDsa.OffsetSquashingMatchesCpu'
smoke+=':CudaDsa.DepthwiseConvolutionMatchesCpu:CudaStages.*:CudaVae.ConvFrameMatchesPlainLoops'
smoke+=':CudaVae.ChannelRmsNormMatchesTheCpuKernel:CudaT5.BiasedSoftmaxMatchesPlainLoops'
filter=${1:-Cuda*:-CudaLargeShapes.*At32k*}
[ "$filter" = smoke ] && filter=$smoke
if [ ! -f "$cpu/libms_cli.a" ]; then
  cmake -S . -B "$cpu" -DCMAKE_BUILD_TYPE=Release -DMEGASLIDE_CUDA=OFF >/dev/null
  cmake --build "$cpu" -j"$(nproc)" --target megaslide_tests
fi
mkdir -p "$out/src" "$out/obj" "$out/include/backend/cuda"
python3 tools/cuda-emu/translate.py src/backend/cuda/kernel_util.cuh "$out/include/backend/cuda/kernel_util.cuh"
for f in src/backend/cuda/*.cu; do python3 tools/cuda-emu/translate.py "$f" "$out/src/$(basename "$f" .cu).cpp"; done
flags=(-std=c++20 -O2 -DTOML_HEADER_ONLY=0 -DTOML_SHARED_LIB=1 -I"$out/include" -Itools/cuda-emu/include -Isrc -Itests
       -Itests/cuda)
sanitize=()  # the CPU build's sanitizers, as its CMakeLists.txt sets them
grep -q '^MEGASLIDE_SANITIZE:STRING=address$' "$cpu/CMakeCache.txt" 2>/dev/null &&
  sanitize=(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -O1 -g1)
flags+=("${sanitize[@]}")
srcs=("$out"/src/*.cpp src/backend/cuda/*.cpp tests/cuda/*.cpp)
# An object is current when it is newer than every file its compile read (the .d file c++ -MMD wrote beside it).
current() {
  [ -e "$1" ] && [ -e "$1.d" ] || return 1
  for f in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$1.d"); do [ "$f" -nt "$1" ] && return 1; done
  return 0
}
objs=()
for s in "${srcs[@]}"; do
  o="$out/obj/$(echo "$s" | tr '/' '_').o"
  objs+=("$o")
  current "$o" && continue
  echo "  c++ $s"
  c++ "${flags[@]}" -MMD -MF "$o.d" -c "$s" -o "$o" &
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n; done
done
wait
# the libraries megaslide_tests links in the CPU build (its own layer libraries named relative to that build)
libs=$(tr ' ' '\n' <"$cpu/CMakeFiles/megaslide_tests.dir/link.txt" | grep -E '\.(so|a)$|^-Wl|^-l' | sed "s|^libms_|$cpu/libms_|")
c++ -o "$out/emu_tests" "${objs[@]}" $libs -fopenmp -lpthread "${sanitize[@]}"
"$out/emu_tests" --gtest_filter="$filter"
