// cuDNN for the fused attention graphs (issue 50; docs/cuda.md), loaded with dlopen by load_cudnn, as NCCL is:
// megaslide never links it, so the CPU build, CI and the GPU bundle need no cuDNN, and the library is whichever the
// machine has (the CUDA toolkit's, or Python's nvidia-cudnn-cu13); cuDNN loads its own sub-libraries and NVRTC. Nothing
// calls it yet: the attention graphs built on it are the next step of issue 50.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/cuda/device.h"

namespace ms::cuda {

// The part of cuDNN's C API the attention graphs use (the backend API: descriptors made, set, finalized and
// executed), as function pointers. The types are cuDNN's ABI (cudnn_graph.h; cudnn.cpp checks them against the header
// where the toolkit has one): statuses, descriptor types, attribute names and types are C enums passed as int.
struct CudnnApi {
  using Handle = struct cudnnContext*;
  using Descriptor = void*;
  static constexpr int kSuccess = 0;
  size_t (*get_version)();
  const char* (*get_error_string)(int status);
  int (*create)(Handle* handle);
  int (*destroy)(Handle handle);
  int (*set_stream)(Handle handle, Stream stream);
  int (*create_descriptor)(int type, Descriptor* descriptor);
  int (*destroy_descriptor)(Descriptor descriptor);
  int (*set_attribute)(Descriptor descriptor, int name, int type, int64_t count, const void* elements);
  int (*get_attribute)(Descriptor descriptor, int name, int type, int64_t requested, int64_t* count, void* elements);
  int (*finalize)(Descriptor descriptor);
  int (*execute)(Handle handle, Descriptor plan, Descriptor variant_pack);
  size_t version = 0;  // cudnnGetVersion: major * 10000 + minor * 100 + patch from 9.0 on
};

// The oldest cuDNN megaslide takes: 9.0 (its fused-attention graphs; libcudnn.so.9).
constexpr size_t kCudnnMinVersion = 90000;

// "9.19.0" for 91900 (and 8.x's major * 1000 encoding, "8.9.7" for 8907).
std::string cudnn_version_name(size_t version);
// Throws ms::Error naming the library, its version and the minimum when version is older than kCudnnMinVersion.
void check_cudnn_version(size_t version, const std::string& path);

// cuDNN from path: every function resolved and the version checked. Throws ms::Error naming the path, what is missing
// and what to do (MEGASLIDE_CUDNN_LIBRARY, the packages that carry it).
CudnnApi open_cudnn(const std::string& path);
// cuDNN from $MEGASLIDE_CUDNN_LIBRARY, else libcudnn.so.9 on the loader's path; loaded once (the library stays loaded).
const CudnnApi& load_cudnn();

}  // namespace ms::cuda
