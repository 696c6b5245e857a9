// The backends this build has, by name: the one place that knows them all (above runtime/, whose interfaces they
// implement, and below the verbs that choose one).
#pragma once
#include <memory>
#include <string>

#include "runtime/backend.h"
#include "runtime/communicator.h"
#include "runtime/device_collectives.h"
#include "runtime/stage_runner.h"
#include "runtime/streamed_model.h"
#include "runtime/trace.h"

namespace ms {

// "" when this build and machine can run the backend `kind`; otherwise why not, in words.
std::string backend_unavailable(BackendKind kind);
// The backend `kind`; throws ms::Error naming backend_unavailable. link_gbps: the CPU backend's emulated link
// (backend/cpu/cpu_backend.h), refused elsewhere. trace may be null.
std::unique_ptr<Backend> make_backend(BackendKind kind, double link_gbps, Trace* trace);

// Rank comm.rank() of a distributed run on backend `kind`, before its backend is made: takes its device (the CUDA
// backend: its local rank's GPU, or the one GPU the rank sees; an error when the machine shows several GPUs but fewer
// than its ranks) and joins it to the other ranks'
// devices (the CUDA backend: NCCL, backend/cuda/nccl.h; collectives that do not complete within timeout_s end the
// run). Null where the collectives go through host memory on comm (the CPU backend).
std::unique_ptr<DeviceCollectives> connect_rank_devices(BackendKind kind, Communicator& comm, double timeout_s);

// The runner for `backend` (by its kind); throws ms::Error for one this build cannot run.
std::unique_ptr<StageRunner> make_stage_runner(const Backend& backend, const ModelConfig& c, const StepShapes& shapes);

// The arena a streamed model carves on backend `kind` (runtime/streamed_model.h): in host memory on the CPU backend.
DevicePlan backend_arena(BackendKind kind, const ModelConfig& c, const StepShapes& shapes, const StreamOptions& o);

// Why the `backend` runner's kernels cannot run model c (a head dim or window over their limits), in words; empty
// when they can.
std::string stage_runner_refuses(BackendKind backend, const ModelConfig& c);

}  // namespace ms
