// What a user chooses for the runtime (docs/runtime.md): the options `train` takes and `plan` shares, parsed once into
// these types. What a run derives from them at its start (the backend, the optimizer schedule auto picks, whether
// blocks keep their activations) is resolved once, by the trainer (train/run_setup.h).
#pragma once
#include <cstdint>
#include <optional>

#include "core/enum_names.h"
#include "runtime/backend.h"

namespace ms {

// none: every stage resident (the reference schedule); stream: layer streaming.
enum class Offload { none, stream };
template <>
struct EnumNames<Offload> {
  static constexpr std::array<EnumName<Offload>, 2> values{{{Offload::none, "none"}, {Offload::stream, "stream"}}};
};

// deferred: the whole gradient pool, then exact global-norm clipping and AdamW; immediate: each stage's update as
// its gradients land, clipped by the previous step's norm.
enum class OptimizerSchedule { deferred, immediate };
template <>
struct EnumNames<OptimizerSchedule> {
  static constexpr std::array<EnumName<OptimizerSchedule>, 2> values{
      {{OptimizerSchedule::deferred, "deferred"}, {OptimizerSchedule::immediate, "immediate"}}};
};

// --optimizer-schedule: auto is deferred where its full gradient pool fits in host memory, else immediate
// (train/memory_fit.h); a run stores the schedule it picked, so that --resume continues it anywhere.
enum class ScheduleChoice { automatic, deferred, immediate };
template <>
struct EnumNames<ScheduleChoice> {
  static constexpr std::array<EnumName<ScheduleChoice>, 3> values{{{ScheduleChoice::automatic, "auto"},
                                                                   {ScheduleChoice::deferred, "deferred"},
                                                                   {ScheduleChoice::immediate, "immediate"}}};
};
inline ScheduleChoice choice_of(OptimizerSchedule s) {
  return s == OptimizerSchedule::deferred ? ScheduleChoice::deferred : ScheduleChoice::immediate;
}
// The schedule a choice names; empty for auto, which the memory check (train/memory_fit.h) or plan resolves.
inline std::optional<OptimizerSchedule> schedule_of(ScheduleChoice c) {
  if (c == ScheduleChoice::automatic) return std::nullopt;
  return c == ScheduleChoice::deferred ? OptimizerSchedule::deferred : OptimizerSchedule::immediate;
}

// --recompute: whether the backward recomputes each block's activations from its input (always: the least memory;
// what a streamed run does) or keeps them from the forward (never: about a quarter less compute, every block's
// activations in memory; resident runs only). auto keeps them on a resident run when they fit in host memory. The
// result is the same bits either way.
enum class Recompute { automatic, always, never };
template <>
struct EnumNames<Recompute> {
  static constexpr std::array<EnumName<Recompute>, 3> values{
      {{Recompute::automatic, "auto"}, {Recompute::always, "always"}, {Recompute::never, "never"}}};
};

struct RuntimeOptions {
  Offload offload = Offload::none;
  ScheduleChoice optimizer_schedule = ScheduleChoice::automatic;
  Recompute recompute = Recompute::automatic;
  int prefetch = 2;                  // stream: K weight slots
  int64_t device_memory = 0;         // stream: arena budget in bytes (0: absent, the backend's default_device_memory)
  bool offload_activations = false;  // stream: block-input checkpoints in host memory
  BackendChoice backend = BackendChoice::automatic;
  double link_gbps = 0;     // stream, CPU backend: emulated host link bandwidth per direction (0: memcpy)
  int64_t host_memory = 0;  // bytes the run may use in host memory (0: detected; this machine's, never saved)
  // The combination no run can have (--recompute never on a streamed run); throws ms::Error naming the fix. Each
  // flag's own range is checked by train's option table (train/option_table.h).
  void validate() const;
};

}  // namespace ms
