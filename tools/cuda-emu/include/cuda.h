// The driver API's stream-memory wait, emulated: the stream spins (yielding) until the 32-bit value reaches v.
#pragma once
#include <atomic>
#include <cstdint>
#include <thread>

#include "emu_stream.h"

using CUresult = int;
using CUstream = CUstream_st*;
using CUdeviceptr = uintptr_t;
using cuuint32_t = uint32_t;
constexpr CUresult CUDA_SUCCESS = 0;
constexpr unsigned CU_STREAM_WAIT_VALUE_GEQ = 0;

inline CUresult emu_stream_wait_value32(CUstream s, CUdeviceptr p, cuuint32_t v, unsigned) {
  uint32_t* at = reinterpret_cast<uint32_t*>(p);
  auto wait = [at, v] {
    while (int32_t(std::atomic_ref<uint32_t>(*at).load(std::memory_order_acquire) - v) < 0) std::this_thread::yield();
  };
  if (s)
    s->push(wait);
  else
    wait();
  return CUDA_SUCCESS;
}
