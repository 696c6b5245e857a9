// The device arena of a training step (docs/runtime.md), sized from the parameter table and the activation visitors:
// the one accounting that both `megaslide plan` and the runtime's arena use. Pure: no allocation, no device.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/enum_names.h"
#include "model/config.h"
#include "model/dims.h"
#include "model/model.h"
#include "runtime/runtime_options.h"

namespace ms {

// Blocks whose activations a resident run keeps beside the workspace's one set when it does not recompute them: every
// block but the last, whose activations stay in the workspace from the forward (ResidentModel, plan_device).
inline int64_t kept_block_act_sets(const ModelConfig& c) { return std::max<int64_t>(0, c.num_layers - 1); }

// Immediate schedule, streamed: host gradient buffers of the largest stage's size, one receiving a stage's
// gradients over the link, one being applied by AdamW.
constexpr int kImmediateStaging = 2;

// The device memory an arena may use, from --device-memory (a byte size such as 16GiB): > 0, or ms::Error naming
// the flag. Absent, a verb uses the device's memory less kDeviceReserve (Backend::default_device_memory).
int64_t parse_device_memory(const std::string& text);
constexpr int64_t kDeviceReserve = 2'000'000'000;  // CUDA context, cuBLASLt workspace, allocator slack

struct ArenaOptions {
  int prefetch = 2;                  // K >= 2 weight slots of the largest stage (streamed runs)
  bool resident = false;             // --offload none: every stage's weights on the device, nothing streamed
  bool offload_activations = false;  // block-input checkpoints live in host memory; the device keeps 3 staging
                                     // slots (one read by the block, one written, one in flight on the link)
  int weight_bytes = 2;              // device weight dtype: bf16 (2) on GPUs, f32 (4) on the CPU backend
  int act_bytes = 2;                 // activation dtype, and with it the backend's workspace layout: 2 is the CUDA
                                     // backend's (bf16 activations, fp32 statistics and time path, the LayerNorm
                                     // fused into the modulation, fp32 reduction scratch, 256-byte aligned
                                     // buffers); 4 the CPU backend's (everything f32, dense)
  int grad_slots = 2;                // stage-sized fp32 gradient slots: one accumulating, one draining D2H;
                                     // 0: the backward accumulates into the host grad pool (CPU backend)
  int ranks = 1;                 // ranks of a distributed run: a slot holds ranks x a stage's chunk (runtime/shards.h)
  bool keep_block_acts = false;  // resident only: every block keeps its forward activations (--recompute
                                 // never, or auto where they fit): num_layers - 1 more blocks' BlockActs
  // Throws ms::Error naming the bad value.
  void validate() const;
  // The workspace layout of the backend that act_bytes names, and the alignment of its buffers.
  WorkspaceLayout layout(const ModelConfig& c, const StepShapes& shapes) const;
  int64_t align() const { return act_bytes == 2 ? 256 : 4; }
};

// Elements of the fp32 input buffers of a streamed step, in the order StreamedModel carves them: two sets of
// x_t [B, in_dim, F, H, W], target [B, out_dim, F, H, W], context [B, Lt, text_dim], t [Bt]; the velocity and its
// gradient. Each as large as the largest of the shapes needs it.
std::vector<int64_t> input_buffers(const ModelConfig& c, const StepShapes& shapes);
// With offload_activations, the block-input checkpoints that go to host memory and come back: 0 .. num_layers - 3.
// The last three (num_layers - 2 .. num_layers) are read by the first backward uses while still in their slots.
inline int64_t offloaded_checkpoints(const ModelConfig& c) { return std::max<int64_t>(0, c.num_layers - 2); }

// Device bytes by category; the arena is carved once, so the peak is their sum.
struct DevicePlan {
  int64_t stage_numel = 0;       // parameters of the largest stage (what a slot holds; with several ranks, rounded
                                 // up to a multiple of them)
  int64_t weight_slots = 0;      // K x largest stage x weight_bytes, or every parameter when resident
  int64_t grad_slots = 0;        // grad_slots x largest stage x 4 (fp32)
  int64_t checkpoints = 0;       // block inputs (num_layers + 1) x N x D, or the 3 staging slots when offloaded
  int64_t checkpoints_host = 0;  // with offload_activations: the block inputs held in host memory, 0 .. num_layers - 3
                                 // (the last three stay in their staging slots)
  int64_t recompute = 0;         // one block's activations and backward scratch (BlockActs, BlockGrads)
  int64_t kept_acts = 0;         // keep_block_acts: blocks 0 .. num_layers - 2's activations (the last block's are
                                 // the recompute buffers')
  int64_t attention = 0;         // attention-kernel state: log-sum-exps (flash-style kernels keep no scores),
                                 // DSA offset-network activations and offset gradients
  int64_t other = 0;             // stem and head activations, residual-stream and embedding gradients, scratch
  int64_t inputs = 0;            // 2 x (x_t, target [B, C, F, H, W], context [B, Lt, text_dim], t), velocity, dvelocity
  int64_t scores_if_materialised = 0;  // one layer's B x nh x L x L' self-attention scores at act_bytes: what a
                                       // kernel without online softmax would add (reported, not counted)

  int64_t workspace() const { return checkpoints + recompute + kept_acts + attention + other; }
  int64_t peak() const { return weight_slots + grad_slots + workspace() + inputs; }
};

// The arena of a run at any of `shapes` (buffers laid out once, each for the largest shape that needs it).
DevicePlan plan_device(const ModelConfig& c, const StepShapes& shapes, const ArenaOptions& o);

}  // namespace ms
