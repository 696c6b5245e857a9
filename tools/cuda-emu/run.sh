#!/usr/bin/env bash
# tools/cuda-emu/run.sh [GTEST_FILTER | smoke] — runs the CUDA tests on the CPU, without a GPU: every CUDA kernel
# (src/backend/cuda/*.cu and tests/cuda/*.cu, translated by translate.py) on an emulation of the CUDA subset they use
# (include/: a block's threads are fibers in a seeded random order, switching at barriers and warp-wide operations;
# shared memory poisoned before each block, blocks shuffled; mma.sync, ldmatrix and cp.async as the PTX ISA defines
# each lane's part; cuBLASLt from its documented semantics, streams as threads running their work in order),
# against the tests' CPU and float64 references. It checks the kernels' and the backend's logic (indexing, fragment
# maps, barriers and waits, reductions, tiling, masks, the GEMM mapping, event and stream ordering), not speed or
# resource limits (shared memory, registers). MEGASLIDE_EMU_SEED=N replays a schedule (each run prints its seed).
# Slow (a CUDA thread at a time): seconds to minutes per test. The default filter leaves out the 32k-token tests
# (tests/cuda/test_large_shapes.cpp: hours here); `smoke` runs every op's forward and backward once at small odd
# shapes (CI runs it: docs/cuda.md).
#
# The other layers' code comes from a build in $CPU_BUILD (default build-cpu, a CPU-only build made here if missing;
# works in build-cuda-emu/, or build-cuda-emu-NAME for another). Given a CUDA build (CI's release build where nvcc
# exists), the emulated backend/cuda takes the place of that build's libms_backend_cuda.a, cudart and cuBLASLt, so the
# registry and the verbs above it run as on a GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD cpu=${CPU_BUILD:-build-cpu} out=build-cuda-emu
[ "$cpu" = build-cpu ] || out=build-cuda-emu-$(basename "$cpu")
# The smoke set: each op's forward and backward once at small odd shapes (the layers and norms, dense and window
# attention, DSA's offset squashing and depthwise conv, a dense and a DSA block whole, the stem and head, the VAE's and
# the text encoder's kernels), a few minutes; it compiles only its tests' files (every kernel and backend source).
smoke='CudaLayers.*:CudaOps.*:CudaAttention.SelfAttentionMatchesFloat64Loops:CudaAttention.WindowMatchesMaskedFloat64Loops'
smoke+=':CudaDsa.OffsetSquashingMatchesCpu:CudaDsa.DepthwiseConvolutionMatchesCpu:CudaStages.BlockForwardAndBackward*'
smoke+=':CudaStages.DsaBlockMatchesFloat64:CudaStages.StemAndHeadMatchFloat64:CudaVae.ConvFrameMatchesPlainLoops'
smoke+=':CudaVae.ChannelRmsNormMatchesTheCpuKernel:CudaVae.Wan22ShortcutsMatchTheReference:CudaT5.BiasedSoftmaxMatchesPlainLoops'
smoke+=':CudaPtx.*'
tests=(tests/cuda/test_*.cpp)
filter=${1:-Cuda*:-CudaLargeShapes.*At32k*}
if [ "$filter" = smoke ]; then
  filter=$smoke
  tests=(tests/cuda/test_{attention,dsa,layers,ops,ptx,stages,t5,vae}.cpp)
fi
if [ ! -f "$cpu/libms_cli.a" ]; then
  cmake -S . -B "$cpu" -DCMAKE_BUILD_TYPE=Release -DMEGASLIDE_CUDA=OFF >/dev/null
  cmake --build "$cpu" -j"$(nproc)" --target megaslide_tests
fi
mkdir -p "$out/src" "$out/obj" "$out/include/backend/cuda"
python3 tools/cuda-emu/translate.py src/backend/cuda/kernel_util.cuh "$out/include/backend/cuda/kernel_util.cuh"
for f in src/backend/cuda/*.cu; do python3 tools/cuda-emu/translate.py "$f" "$out/src/$(basename "$f" .cu).cpp"; done
for f in tests/cuda/*.cu; do python3 tools/cuda-emu/translate.py "$f" "$out/src/tests_$(basename "$f" .cu).cpp"; done
flags=(-std=c++20 -O2 -DTOML_HEADER_ONLY=0 -DTOML_SHARED_LIB=1 -I"$out/include" -Itools/cuda-emu/include -Isrc -Itests
       -Itests/cuda)
srcs=("$out"/src/*.cpp src/backend/cuda/*.cpp "${tests[@]}")
# An object is current when it is newer than every file its compile read (the .d file c++ -MMD wrote beside it).
current() {
  [ -e "$1" ] && [ -e "$1.d" ] || return 1
  for f in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$1.d"); do [ "$f" -nt "$1" ] && return 1; done
  return 0
}
objs=() pids=()
for s in "${srcs[@]}"; do
  o="$out/obj/$(echo "$s" | tr '/' '_').o"
  objs+=("$o")
  current "$o" && continue
  echo "  c++ $s"
  c++ "${flags[@]}" -MMD -MF "$o.d" -c "$s" -o "$o" &
  pids+=($!)
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do sleep 0.2; done
done
for p in "${pids[@]}"; do wait "$p" || { echo "cuda-emu: a compile failed (above)"; exit 1; }; done
# The libraries the build's test binary links, its own named relative to the build: a CUDA build's CUDA test binary
# less the real backend/cuda, cudart and cuBLASLt; a CPU build's megaslide_tests.
link=$cpu/CMakeFiles/megaslide_cuda_tests.dir/link.txt
[ -f "$link" ] || link=$cpu/CMakeFiles/megaslide_tests.dir/link.txt
libs=$(tr ' ' '\n' <"$link" | grep -E '\.(so|a)$|^-Wl|^-l' | grep -vE 'libms_backend_cuda\.a$|libcudart|libcublas|/libcuda\.|^-lcuda' |
       sed "s|^libms_|$cpu/libms_|")
c++ -o "$out/emu_tests" "${objs[@]}" $libs -fopenmp -lpthread
"$out/emu_tests" --gtest_filter="$filter"
