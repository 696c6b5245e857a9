#include "runtime/arena.h"
#include "runtime/shards.h"

#include <algorithm>
#include <functional>
#include <iterator>

#include "core/check.h"
#include "core/units.h"
#include "model/flops.h"
#include "model/model.h"
#include "model/param_table.h"
#include "model/workspace.h"
#include "runtime/reduction_scratch.h"

namespace ms {

int64_t parse_device_memory(const std::string& text) {
  const int64_t bytes = parse_bytes(text, "--device-memory");
  if (bytes <= 0)
    MS_FAIL("--device-memory ", quote_text(text),
            " leaves no room for the arena; give a budget such as 16GiB, or leave ",
            "the option out for the default (a GPU's memory less ", format_bytes(double(kDeviceReserve)),
            "; no limit on the CPU backend)");
  return bytes;
}
namespace {

// Whether `field` is a member of the struct `s` (both inside one ModelWorkspace).
template <class S, class P>
bool member_of(const P& field, const S& s) {
  const std::less<const void*> lt;
  const void *f = &field, *b = &s, *e = &s + 1;
  return !lt(f, b) && lt(f, e);
}

}  // namespace

std::vector<int64_t> input_buffers(const ModelConfig& c, const StepShapes& shapes) {
  const int64_t video = shapes.most([](const ModelDims& d) { return d.B * d.F * d.H * d.W; });
  const int64_t context = shapes.most([&](const ModelDims& d) { return d.B * d.Lt * c.text_dim; });
  const int64_t B = shapes.most([](const ModelDims& d) { return d.Bt(); });  // t [Bt]
  const int64_t x = video * c.in_dim, y = video * c.out_dim;
  return {x, y, context, B, x, y, context, B, y, y};
}

void ArenaOptions::validate() const {
  if (!resident && prefetch < 2)
    MS_FAIL("--prefetch ", prefetch, " is below 2: streaming needs one weight slot computing and one loading");
  for (int b : {weight_bytes, act_bytes})
    if (b != 2 && b != 4) MS_FAIL("device dtype size ", b, " is not 2 (bf16) or 4 (f32)");
  if (grad_slots < 0) MS_FAIL("gradient slots must be >= 0, got ", grad_slots);
  if (keep_block_acts && !resident)
    MS_FAIL("kept block activations need a resident arena: a streamed one holds one block's");
}

WorkspaceLayout ArenaOptions::layout(const ModelConfig& c, const StepShapes& shapes) const {
  WorkspaceLayout l;
  l.checkpoint_slots = offload_activations ? 3 : -1;
  if (act_bytes == 2) {  // the CUDA backend (backend/cuda/cuda_ops.h: CudaOps::kFusedNormModulate)
    l.fused_norm = true;
    l.reduction_scratch = shapes.most([&](const ModelDims& d) { return cuda::block_reduction_scratch(c, d); });
  }
  return l;
}

DevicePlan plan_device(const ModelConfig& c, const StepShapes& shapes, const ArenaOptions& o) {
  o.validate();
  const ParamTable table(c);
  DevicePlan p;
  p.stage_numel = Shards(table, 0, o.ranks).max_padded();
  const int64_t align = o.align();
  auto rounded = [&](int64_t bytes) { return round_up(bytes, align); };  // one buffer, as carved
  p.weight_slots =
      o.resident ? rounded(table.total() * o.weight_bytes) : o.prefetch * rounded(p.stage_numel * o.weight_bytes);
  p.grad_slots = int64_t(o.grad_slots) * rounded(p.stage_numel * 4);

  // Every activation buffer of the schedule, by the visitor that lays it out in the backend's types and alignment.
  WorkspaceLayout l = o.layout(c, shapes);
  l.checkpoint_slots = -1;  // every checkpoint: those in host memory are counted apart
  int64_t block_acts = 0;   // one block's BlockActs, as ResidentModel keeps each
  auto count = [&](auto ws) {
    model_workspace_visitor<decltype(ws)>(c, shapes, l)(ws, [&](int64_t n, auto& field) {
      const int64_t bytes = aligned_bytes<decltype(field)>(n, align);
      const void* f = &field;
      if (member_of(field, ws.block)) block_acts += bytes;
      const bool attention = f == &ws.block.attn_lse || f == &ws.block.yc_lse || f == &ws.block.off_h ||
                             f == &ws.block.off_g || f == &ws.block.off_raw || f == &ws.block.offsets ||
                             f == &ws.block_grads.off;
      if (f == &ws.xs)
        p.checkpoints += bytes;
      else if (attention)
        p.attention += bytes;
      else if (member_of(field, ws.block) || member_of(field, ws.block_grads))
        p.recompute += bytes;
      else
        p.other += bytes;
    });
  };
  if (o.act_bytes == 2)
    count(ModelWorkspace<uint16_t, float>{});
  else
    count(ModelWorkspace<float>{});
  if (o.keep_block_acts) p.kept_acts = kept_block_act_sets(c) * block_acts;
  const int64_t ND = shapes.most([](const ModelDims& d) { return d.N(); }) * c.dim;
  MS_CHECK(p.checkpoints == rounded((c.num_layers + 1) * ND * o.act_bytes), "checkpoints ", p.checkpoints);
  if (o.offload_activations) {
    p.checkpoints_host = offloaded_checkpoints(c) * ND * o.act_bytes;
    p.checkpoints = rounded(3 * ND * o.act_bytes);
  }
  // fp32, as StreamedModel carves them: two input sets (one uploading) and the velocity and its gradient.
  for (int64_t n : input_buffers(c, shapes)) p.inputs += rounded(n * 4);
  p.scores_if_materialised = shapes.most([&](const ModelDims& d) {
    return int64_t(double(d.B * c.num_heads) * double(d.L) * self_attention_keys(c, d)) * o.act_bytes;
  });
  return p;
}

}  // namespace ms
