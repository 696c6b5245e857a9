// The CUDA runtime calls megaslide makes, emulated (emu_core.h, emu_stream.h).
#pragma once
#include "emu_core.h"

#define MS_CUDA_EMULATED 1  // tests that need a real GPU's libraries (NCCL) skip under the emulator

using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNotReady = 600
};
enum cudaMemcpyKind {
  cudaMemcpyHostToHost,
  cudaMemcpyHostToDevice,
  cudaMemcpyDeviceToHost,
  cudaMemcpyDeviceToDevice,
  cudaMemcpyDefault
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
enum cudaMemoryType { cudaMemoryTypeUnregistered = 0, cudaMemoryTypeHost = 1, cudaMemoryTypeDevice = 2 };
struct cudaPointerAttributes {
  cudaMemoryType type;
};
enum cudaDriverEntryPointQueryResult { cudaDriverEntryPointSuccess = 0, cudaDriverEntryPointSymbolNotFound = 1 };
constexpr unsigned cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2, cudaEventBlockingSync = 1,
                   cudaHostAllocMapped = 2, cudaHostRegisterDefault = 0;
constexpr unsigned long long cudaEnableDefault = 0;

inline const char* cudaGetErrorName(cudaError_t) { return "cudaErrorEmu"; }
inline const char* cudaGetErrorString(cudaError_t) { return "emulated error"; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}

inline cudaError_t cudaMalloc(void** p, size_t n) {
  *p = std::aligned_alloc(256, (n + 255) / 256 * 256 + 256);
  const std::lock_guard<std::mutex> l(emu_memory().m);
  emu_memory().device[static_cast<const char*>(*p)] = n;
  return cudaSuccess;
}
template <class T>
cudaError_t cudaMalloc(T** p, size_t n) {
  return cudaMalloc(reinterpret_cast<void**>(p), n);
}
inline cudaError_t cudaFree(void* p) {
  {
    const std::lock_guard<std::mutex> l(emu_memory().m);
    emu_memory().device.erase(static_cast<const char*>(p));
  }
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  *free = size_t(1) << 36;
  *total = size_t(1) << 37;
  return cudaSuccess;
}
inline cudaError_t cudaHostAlloc(void** p, size_t n, unsigned) {
  *p = std::aligned_alloc(256, (n + 255) / 256 * 256);
  const std::lock_guard<std::mutex> l(emu_memory().m);
  emu_memory().host[static_cast<const char*>(*p)] = n;
  return cudaSuccess;
}
inline cudaError_t cudaFreeHost(void* p) {
  {
    const std::lock_guard<std::mutex> l(emu_memory().m);
    emu_memory().host.erase(static_cast<const char*>(p));
  }
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaHostGetDevicePointer(void** d, void* h, unsigned) {
  *d = h;
  return cudaSuccess;
}
inline cudaError_t cudaHostRegister(void* p, size_t n, unsigned) {
  const std::lock_guard<std::mutex> l(emu_memory().m);
  emu_memory().host[static_cast<const char*>(p)] = n;
  return cudaSuccess;
}
inline cudaError_t cudaHostUnregister(void* p) {
  const std::lock_guard<std::mutex> l(emu_memory().m);
  emu_memory().host.erase(static_cast<const char*>(p));
  return cudaSuccess;
}
inline cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p) {
  const std::lock_guard<std::mutex> l(emu_memory().m);
  a->type = EmuMemory::in(emu_memory().device, p) ? cudaMemoryTypeDevice
            : EmuMemory::in(emu_memory().host, p) ? cudaMemoryTypeHost
                                                  : cudaMemoryTypeUnregistered;
  return cudaSuccess;
}

inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = new CUstream_st;
  const std::lock_guard<std::mutex> l(emu_memory().m);
  emu_memory().streams.insert(*s);
  return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
  s->drain();
  {
    const std::lock_guard<std::mutex> l(emu_memory().m);
    emu_memory().streams.erase(s);
  }
  delete s;
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (s) s->drain();
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() {
  std::vector<CUstream_st*> all;
  {
    const std::lock_guard<std::mutex> l(emu_memory().m);
    all.assign(emu_memory().streams.begin(), emu_memory().streams.end());
  }
  for (CUstream_st* s : all) s->drain();
  return cudaSuccess;
}
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  *e = new CUevent_st;
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  emu_enqueue(s, [e] { e->set(); });
  return cudaSuccess;
}
inline cudaError_t cudaEventQuery(cudaEvent_t e) {
  const std::lock_guard<std::mutex> l(e->m);
  return e->done ? cudaSuccess : cudaErrorNotReady;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  e->wait();
  return cudaSuccess;
}
inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  emu_enqueue(s, [e] { e->wait(); });
  return cudaSuccess;
}

using cudaHostFn_t = void (*)(void*);
inline cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* data) {
  emu_enqueue(s, [=] { fn(data); });
  return cudaSuccess;
}

// The stream-ordered allocator: the allocation at once, the free once the stream's earlier work has run.
inline cudaError_t cudaMallocAsync(void** p, size_t n, cudaStream_t) { return cudaMalloc(p, n); }
inline cudaError_t cudaFreeAsync(void* p, cudaStream_t st) {
  emu_enqueue(st, [=] { cudaFree(p); });
  return cudaSuccess;
}
using cudaMemPool_t = void*;
enum cudaMemPoolAttr { cudaMemPoolAttrReleaseThreshold = 4 };
inline cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int) {
  *pool = nullptr;
  return cudaSuccess;
}
inline cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void*) { return cudaSuccess; }
inline cudaError_t cudaMemPoolTrimTo(cudaMemPool_t, size_t) { return cudaSuccess; }

inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t st = nullptr) {
  emu_enqueue(st, [=] { std::memmove(d, s, n); });
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind k) {
  return cudaMemcpyAsync(d, s, n, k, nullptr);
}
inline cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t st = nullptr) {
  emu_enqueue(st, [=] { std::memset(d, v, n); });
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* d, int v, size_t n) { return cudaMemsetAsync(d, v, n, nullptr); }
template <class F>
cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) {
  return cudaSuccess;
}
struct cudaDeviceProp {
  char name[256];
  int major, minor, multiProcessorCount;
  size_t totalGlobalMem;
  int l2CacheSize;
};
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::strcpy(p->name, "emulated sm_90");
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = 1;
  p->totalGlobalMem = size_t(1) << 37;
  p->l2CacheSize = 1 << 25;
  return cudaSuccess;
}

// cuStreamWaitValue32 through the runtime's driver entry point (cuda.h).
#include "cuda.h"
inline cudaError_t cudaGetDriverEntryPointByVersion(const char* name, void** fn, unsigned, unsigned long long,
                                                    cudaDriverEntryPointQueryResult* found) {
  *fn = std::strcmp(name, "cuStreamWaitValue32") == 0 ? reinterpret_cast<void*>(&emu_stream_wait_value32) : nullptr;
  *found = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}
