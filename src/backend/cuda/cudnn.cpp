#include "backend/cuda/cudnn.h"

#include <dlfcn.h>

#include <cstdlib>

#include "core/check.h"
#include "core/log.h"

#if __has_include(<cudnn_graph.h>)  // the toolkit's header: CudnnApi's ABI is cuDNN's
#include <cudnn_graph.h>
static_assert(ms::cuda::CudnnApi::kSuccess == CUDNN_STATUS_SUCCESS && sizeof(cudnnStatus_t) == sizeof(int) &&
              sizeof(cudnnBackendDescriptorType_t) == sizeof(int) &&
              sizeof(cudnnBackendAttributeName_t) == sizeof(int) &&
              sizeof(cudnnBackendAttributeType_t) == sizeof(int) &&
              sizeof(cudnnBackendDescriptor_t) == sizeof(ms::cuda::CudnnApi::Descriptor));
#endif

namespace ms::cuda {
namespace {

template <class F>
void resolve(void* lib, const char* name, F& f, const std::string& path) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f)
    MS_FAIL(path, " has no ", name, ": it is not cuDNN, or not cuDNN 9 (", cudnn_version_name(kCudnnMinVersion),
            " or newer is needed)");
}

}  // namespace

std::string cudnn_version_name(size_t v) {
  return v >= 90000 ? cat(v / 10000, ".", v / 100 % 100, ".", v % 100) : cat(v / 1000, ".", v / 100 % 10, ".", v % 100);
}

void check_cudnn_version(size_t version, const std::string& path) {
  if (version < kCudnnMinVersion)
    MS_FAIL(path, " is cuDNN ", cudnn_version_name(version), "; megaslide's fused attention needs ",
            cudnn_version_name(kCudnnMinVersion), " or newer");
}

CudnnApi open_cudnn(const std::string& path) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    MS_FAIL("cuDNN's fused attention needs ", path, ", which cannot be loaded (", dlerror(),
            "): install cuDNN 9 (the CUDA toolkit's, or Python's nvidia-cudnn-cu13), add its folder to "
            "LD_LIBRARY_PATH or set MEGASLIDE_CUDNN_LIBRARY to the library's path");
  CudnnApi a;
  resolve(lib, "cudnnGetVersion", a.get_version, path);
  a.version = a.get_version();
  check_cudnn_version(a.version, path);
  resolve(lib, "cudnnGetErrorString", a.get_error_string, path);
  resolve(lib, "cudnnCreate", a.create, path);
  resolve(lib, "cudnnDestroy", a.destroy, path);
  resolve(lib, "cudnnSetStream", a.set_stream, path);
  resolve(lib, "cudnnBackendCreateDescriptor", a.create_descriptor, path);
  resolve(lib, "cudnnBackendDestroyDescriptor", a.destroy_descriptor, path);
  resolve(lib, "cudnnBackendSetAttribute", a.set_attribute, path);
  resolve(lib, "cudnnBackendGetAttribute", a.get_attribute, path);
  resolve(lib, "cudnnBackendFinalize", a.finalize, path);
  resolve(lib, "cudnnBackendExecute", a.execute, path);
  log_debug("cuDNN ", cudnn_version_name(a.version), " from ", path);
  return a;  // the library stays loaded for the process's life
}

const CudnnApi& load_cudnn() {
  static const CudnnApi api = [] {
    const char* env = std::getenv("MEGASLIDE_CUDNN_LIBRARY");
    return open_cudnn(env && *env ? env : "libcudnn.so.9");
  }();
  return api;
}

}  // namespace ms::cuda
