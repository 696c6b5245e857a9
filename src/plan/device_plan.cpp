#include "plan/device_plan.h"

#include <algorithm>
#include <functional>
#include <iterator>

#include "core/check.h"
#include "model/model.h"
#include "model/param_table.h"
#include "plan/flops.h"

namespace ms {
namespace {

// Whether `field` is a member of the struct `s` (both inside one ModelWorkspace).
template <class S, class P>
bool member_of(const P& field, const S& s) {
  const std::less<const void*> lt;
  const void *f = &field, *b = &s, *e = &s + 1;
  return !lt(f, b) && lt(f, e);
}

}  // namespace

void ArenaOptions::validate() const {
  if (!resident && prefetch < 2)
    MS_FAIL("--prefetch ", prefetch, " is below 2: streaming needs one weight slot computing and one loading");
  for (int b : {weight_bytes, act_bytes})
    if (b != 2 && b != 4) MS_FAIL("device dtype size ", b, " is not 2 (bf16) or 4 (f32)");
  if (grad_slots < 0) MS_FAIL("gradient slots must be >= 0, got ", grad_slots);
}

DevicePlan plan_device(const ModelConfig& c, const ModelDims& d, const ArenaOptions& o) {
  o.validate();
  const ParamTable table(c);
  DevicePlan p;
  p.stage_numel = table.max_stage_numel();
  p.weight_slots = (o.resident ? table.total() : o.prefetch * p.stage_numel) * o.weight_bytes;
  p.grad_slots = int64_t(o.grad_slots) * p.stage_numel * 4;

  // Every activation buffer of the resident schedule, by the visitor that lays it out.
  ModelWorkspace<char> ws{};
  char** const attention_fields[] = {&ws.block.attn_lse, &ws.block.yc_lse,  &ws.block.off_h,    &ws.block.off_g,
                                     &ws.block.off_raw,  &ws.block.offsets, &ws.block_grads.off};
  int64_t checkpoints = 0, recompute = 0, attention = 0, other = 0;
  visit_model_workspace(c, d, ws, [&](int64_t n, char*& field) {
    const bool attn =
        std::find(std::begin(attention_fields), std::end(attention_fields), &field) != std::end(attention_fields);
    if (&field == &ws.xs)
      checkpoints += n;
    else if (attn)
      attention += n;
    else if (member_of(field, ws.block) || member_of(field, ws.block_grads))
      recompute += n;
    else
      other += n;
  });
  const int64_t ND = d.N() * c.dim;
  MS_CHECK(checkpoints == (c.num_layers + 1) * ND, "checkpoints ", checkpoints);
  if (o.offload_activations) {
    p.checkpoints_host = checkpoints * o.act_bytes;
    checkpoints = 3 * ND;
  }
  p.checkpoints = checkpoints * o.act_bytes;
  p.recompute = recompute * o.act_bytes;
  p.attention = attention * o.act_bytes;
  p.other = other * o.act_bytes;
  const int64_t video = d.B * d.F * d.H * d.W;
  const int64_t one_set = video * (c.in_dim + c.out_dim) + d.B * d.Lt * c.text_dim + d.B;  // x_t, target, context, t
  p.inputs = (2 * one_set + video * 2 * c.out_dim) * o.act_bytes;  // two sets (one uploading), velocity, its gradient
  p.scores_if_materialised = int64_t(double(d.B * c.num_heads) * double(d.L) * self_attention_keys(c, d)) * o.act_bytes;
  return p;
}

}  // namespace ms
