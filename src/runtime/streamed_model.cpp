#include "runtime/streamed_model.h"

#include <algorithm>

#include "core/check.h"
#include "core/units.h"
#include "ops/mse_loss.h"

namespace ms {
namespace {

// Stage uses in order: forward 0 .. S-1 (the head also runs its backward), then backward S-2 .. 0.
std::vector<int> stage_uses(int S) {
  std::vector<int> uses;
  for (int s = 0; s < S; ++s) uses.push_back(s);
  for (int s = S - 2; s >= 0; --s) uses.push_back(s);
  return uses;
}

}  // namespace

std::vector<SlotUse> slot_schedule(int stages, int K) {
  std::vector<SlotUse> out;
  std::vector<int> held(size_t(K), -1), last(size_t(K), -1);  // per slot: its stage, its latest use
  const std::vector<int> uses = stage_uses(stages);
  for (int i = 0; i < int(uses.size()); ++i) {
    const int s = uses[size_t(i)];
    int slot = int(std::find(held.begin(), held.end(), s) - held.begin());
    const bool resident = slot < K;
    if (!resident) slot = int(std::min_element(last.begin(), last.end()) - last.begin());
    out.push_back({s, slot, last[size_t(slot)], resident});
    held[size_t(slot)] = s;
    last[size_t(slot)] = i;
  }
  return out;
}

StreamedModel::StreamedModel(const ModelConfig& c, const ModelDims& d, Backend& backend, const StreamOptions& o)
    : cfg_(c), dims_(d), table_(c), be_(backend), opts_(o) {
  ArenaOptions ao;
  ao.prefetch = o.prefetch;
  ao.weight_bytes = backend.weight_bytes();
  ao.act_bytes = 4;  // activations are f32 on every backend today
  ao.grad_slots = 2;
  ao.offload_activations = o.offload_activations;
  plan_ = plan_device(c, d, ao);
  if (o.device_budget > 0 && plan_.peak() > o.device_budget)
    MS_FAIL("the device arena needs ", format_bytes(double(plan_.peak())), " (weight slots ",
            format_bytes(double(plan_.weight_slots)), ", activations ", format_bytes(double(plan_.workspace())),
            ") but --device-memory is ", format_bytes(double(o.device_budget)), "; pass --device-memory ", plan_.peak(),
            " or more, or use fewer frames, a smaller batch or --prefetch 2");
  MS_CHECK(backend.weight_bytes() == 4, "the streamed model computes in f32 weights");
  arena_ = static_cast<char*>(be_.alloc_device(size_t(plan_.peak())));
  char* p = arena_;
  const int64_t stage = table_.max_stage_numel();
  for (int k = 0; k < o.prefetch; ++k, p += stage * 4) slots_.push_back(reinterpret_cast<float*>(p));
  for (int k = 0; k < 2; ++k, p += stage * 4) grad_slots_.push_back(reinterpret_cast<float*>(p));
  const int64_t slots = o.offload_activations ? 3 : -1;
  auto visit = [&](auto& ws, auto&& f) { visit_model_workspace(cfg_, dims_, ws, f, slots); };
  if (o.offload_activations) host_checkpoints_ = AlignedBuffer<float>(size_t((c.num_layers + 1) * d.N() * c.dim));
  MS_CHECK(workspace_numel<ModelWorkspace<float>>(visit) * 4 == plan_.workspace(), "arena plan and layout disagree");
  ws_ = bind_workspace<ModelWorkspace<float>>(reinterpret_cast<float*>(p), visit);
  p += plan_.workspace();
  const int64_t video = d.B * d.F * d.H * d.W;
  auto take = [&](int64_t n) {
    float* q = reinterpret_cast<float*>(p);
    p += n * 4;
    return q;
  };
  for (Inputs& in : inputs_) {
    in.xt = take(video * c.in_dim);
    in.target = take(video * c.out_dim);
    in.context = take(d.B * d.Lt * c.text_dim);
    in.t = take(d.B);
  }
  velocity_ = take(video * c.out_dim);
  dvelocity_ = take(video * c.out_dim);
  MS_CHECK(p == arena_ + plan_.peak(), "arena carved ", p - arena_, " of ", plan_.peak(), " bytes");
  schedule_ = slot_schedule(int(table_.stages().size()), o.prefetch);
  st_ = {be_.create_stream("compute", StreamKind::device), be_.create_stream("h2d", StreamKind::device),
         be_.create_stream("d2h", StreamKind::device)};
}

float* StreamedModel::checkpoint(int64_t k) const {
  const int64_t ND = dims_.N() * cfg_.dim;
  return ws_.xs + (opts_.offload_activations ? k % 3 : k) * ND;
}

StreamedModel::~StreamedModel() {
  be_.sync_all();
  be_.free_device(arena_);
}

void StreamedModel::enqueue_inputs(const float* xt, const float* t, const float* context, const float* target) {
  const int64_t video = dims_.B * dims_.F * dims_.H * dims_.W;
  current_ ^= 1;
  Inputs& in = inputs_[current_];
  be_.wait(st_.h2d, in.free);
  // context is padded to text_len by the caller
  be_.copy_h2d(st_.h2d, in.xt, xt, size_t(video * cfg_.in_dim) * 4, "inputs");
  be_.copy_h2d(st_.h2d, in.target, target, size_t(video * cfg_.out_dim) * 4, "inputs");
  be_.copy_h2d(st_.h2d, in.context, context, size_t(dims_.B * dims_.Lt * cfg_.text_dim) * 4, "inputs");
  be_.copy_h2d(st_.h2d, in.t, t, size_t(dims_.B) * 4, "inputs");
  in.landed = be_.record(st_.h2d);
}

void StreamedModel::enqueue_step(const uint16_t* weights, const GradRoute& route,
                                 const std::function<Event(int)>& ready) {
  const auto& stages = table_.stages();
  const int S = int(stages.size()), L = int(cfg_.num_layers);
  const int64_t ND = dims_.N() * cfg_.dim, video = dims_.B * dims_.F * dims_.H * dims_.W;
  Inputs& in = inputs_[current_];
  be_.wait(st_.compute, in.landed);
  // The compute stream's ops (empty with skip_compute: the benchmark's transfer-only time).
  auto compute = [&](const char* name, std::function<void()> fn) {
    be_.launch(st_.compute, name, opts_.skip_compute ? std::function<void()>([] {}) : std::move(fn));
  };
  std::vector<Event> slot_free(schedule_.size()), grads_sent(schedule_.size());
  const bool offload = opts_.offload_activations;
  // offload: checkpoint k saved on the host; block b's backward done (index L: the head's)
  std::vector<Event> saved(size_t(L + 1)), backward_done(size_t(L + 1));
  int backward_index = 0;
  for (size_t i = 0; i < schedule_.size(); ++i) {
    const SlotUse& use = schedule_[i];
    const int s = use.stage;
    const StageInfo& info = stages[size_t(s)];
    float* w = slots_[size_t(use.slot)];
    // H2D: the slot must be free (its previous user finished) and, on first use, the stage updated. A slot
    // that still holds this stage from earlier in the step keeps it (slot_schedule).
    if (!use.resident) {
      if (use.previous >= 0) be_.wait(st_.h2d, slot_free[size_t(use.previous)]);
      if (opts_.serialize && i > 0) {
        be_.wait(st_.h2d, slot_free[i - 1]);
        be_.wait(st_.h2d, be_.record(st_.d2h));
      }
      if (int(i) == s) be_.wait(st_.h2d, ready(s));
      be_.upload_weights(st_.h2d, w, weights + info.offset, info.numel, "weights");
      be_.wait(st_.compute, be_.record(st_.h2d));
    }
    const bool forward = int(i) < S - 1;
    float* g = nullptr;
    if (!forward) {  // the head and every backward use write a gradient slot
      const int j = backward_index++;
      g = grad_slots_[size_t(j % 2)];
      if (j >= 2) be_.wait(st_.compute, grads_sent[size_t(j - 2)]);
    }
    const float* cw = w;
    const int64_t numel = info.numel;
    if (info.kind == StageKind::stem && forward) {
      compute("stem", [=, this] {
        stem_forward(cfg_, dims_, bind_stem(cfg_, cw), in.xt, in.t, in.context, ws_.stem);
        std::copy(ws_.stem.x0, ws_.stem.x0 + ND, checkpoint(0));
        if (probe_) probe_(0, checkpoint(0), ND);
      });
    } else if (info.kind == StageKind::block && forward) {
      const int64_t b = info.block;
      if (offload && b >= 2) be_.wait(st_.compute, saved[size_t(b - 2)]);  // staging slot of xs[b+1] drained
      compute("block", [=, this] {
        block_forward(cfg_, dims_, b, bind_block(cfg_, cw), checkpoint(b), ws_.stem.e0, ws_.stem.ctx, ws_.block,
                      checkpoint(b + 1));
        if (probe_) probe_(b + 1, checkpoint(b + 1), ND);
      });
    } else if (info.kind == StageKind::head) {
      compute("head", [=, this] {
        std::fill(g, g + numel, 0.0f);
        head_forward(cfg_, dims_, bind_head(cfg_, cw), checkpoint(L), ws_.stem.e, ws_.head, velocity_);
        if (probe_) probe_(L + 1, velocity_, video * cfg_.out_dim);
        loss_ = cpu::mse_loss(velocity_, in.target, dvelocity_, video * cfg_.out_dim);
        std::fill(ws_.de, ws_.de + dims_.B * cfg_.dim, 0.0f);
        std::fill(ws_.de0, ws_.de0 + dims_.B * 6 * cfg_.dim, 0.0f);
        std::fill(ws_.dctx, ws_.dctx + dims_.B * dims_.Lt * cfg_.dim, 0.0f);
        head_backward(cfg_, dims_, bind_head(cfg_, cw), checkpoint(L), ws_.head, dvelocity_, ws_.dres, ws_.de,
                      bind_head(cfg_, g), ws_.scratch);
      });
    } else if (info.kind == StageKind::block) {
      const int64_t b = info.block;
      if (offload && b <= L - 3) {  // xs[b] comes back into its staging slot once block b+3 has read its own
        be_.wait(st_.h2d, backward_done[size_t(b + 3)]);
        be_.copy_h2d(st_.h2d, checkpoint(b), host_checkpoints_.data() + b * ND, size_t(ND) * 4, "checkpoint");
        be_.wait(st_.compute, be_.record(st_.h2d));
      }
      compute("block backward", [=, this] {
        std::fill(g, g + numel, 0.0f);
        block_backward(cfg_, dims_, b, bind_block(cfg_, cw), checkpoint(b), ws_.stem.e0, ws_.stem.ctx, ws_.block,
                       ws_.block_grads, ws_.dres, ws_.dres, ws_.de0, ws_.dctx, bind_block(cfg_, g));
      });
    } else {
      compute("stem backward", [=, this] {
        std::fill(g, g + numel, 0.0f);
        stem_backward(cfg_, dims_, bind_stem(cfg_, cw), ws_.stem, ws_.dres, ws_.de, ws_.de0, ws_.dctx,
                      bind_stem(cfg_, g), static_cast<float*>(nullptr), static_cast<float*>(nullptr), ws_.scratch);
      });
    }
    slot_free[i] = be_.record(st_.compute);
    if (info.kind == StageKind::head) backward_done[size_t(L)] = slot_free[i];
    if (info.kind == StageKind::block && !forward) backward_done[size_t(info.block)] = slot_free[i];
    if (offload && forward && info.kind != StageKind::head) {  // send the checkpoint this use wrote to the host
      const int64_t k = info.kind == StageKind::stem ? 0 : info.block + 1;
      be_.wait(st_.d2h, slot_free[i]);
      be_.copy_d2h(st_.d2h, host_checkpoints_.data() + k * ND, checkpoint(k), size_t(ND) * 4, "checkpoint");
      saved[size_t(k)] = be_.record(st_.d2h);
    }
    if (g) {
      const int j = backward_index - 1;
      float* host = route.buffer(j, s);
      be_.wait(st_.d2h, slot_free[i]);
      be_.wait(st_.d2h, route.free(j));
      be_.copy_d2h(st_.d2h, host, g, size_t(numel) * 4, "grads");
      grads_sent[size_t(j)] = be_.record(st_.d2h);
      route.landed(j, s, host, grads_sent[size_t(j)]);
    }
  }
  in.free = be_.record(st_.compute);
}

int64_t StreamedModel::uploaded_weights() const {
  int64_t n = 0;
  for (const SlotUse& u : schedule_)
    if (!u.resident) n += table_.stages()[size_t(u.stage)].numel;
  return n;
}

double StreamedModel::finish() {
  be_.sync_all();
  return loss_;
}

}  // namespace ms
