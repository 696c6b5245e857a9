#include "runtime/streamed_model.h"

#include <algorithm>

#include "core/check.h"
#include "core/units.h"
#include "model/workspace.h"
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

ArenaOptions arena_options(int weight_bytes, int act_bytes, const StreamOptions& o) {
  ArenaOptions ao;
  ao.prefetch = o.prefetch;
  ao.weight_bytes = weight_bytes;
  ao.act_bytes = act_bytes;
  ao.grad_slots = o.forward_only ? 0 : 2;
  ao.offload_activations = o.offload_activations || o.forward_only;  // forward_only: the 3 slots' layout
  ao.ranks = o.ranks;
  return ao;
}

}  // namespace

StreamOptions stream_options(const RuntimeOptions& r, int ranks) {
  StreamOptions o;
  o.prefetch = r.prefetch;
  o.device_memory = r.device_memory;
  o.offload_activations = r.offload_activations;
  o.ranks = ranks;
  return o;
}

std::vector<SlotUse> slot_uses(int stages, int K) {
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

DevicePlan streamed_arena(const ModelConfig& c, const StepShapes& shapes, int weight_bytes, int act_bytes,
                          const StreamOptions& o) {
  return plan_device(c, shapes, arena_options(weight_bytes, act_bytes, o));
}

StreamedModel::StreamedModel(const ModelConfig& c, const StepShapes& shapes, Backend& backend, const StreamOptions& o,
                             std::unique_ptr<StageRunner> runner, Communicator* comm, DeviceCollectives* device)
    : cfg_(c),
      shapes_(shapes),
      table_(c),
      comm_(comm),
      device_(device),
      shards_(table_, comm ? comm->rank() : 0, o.ranks),
      be_(backend),
      opts_(o),
      runner_(std::move(runner)) {
  MS_CHECK((comm ? comm->size() : 1) == o.ranks, "StreamedModel: ", o.ranks, " ranks planned, the communicator has ",
           comm ? comm->size() : 1);
  MS_CHECK(o.ranks == 1 || device || backend.kind() == BackendKind::cpu, "StreamedModel: the ", backend.kind(),
           " backend's slots are device memory, which the ranks' collectives reach through device collectives only");
  const ArenaOptions ao = arena_options(backend.weight_bytes(), runner_->act_bytes(), o);
  plan_ = plan_device(c, shapes, ao);
  budget_ = o.device_memory > 0 ? o.device_memory : backend.default_device_memory();
  if (budget_ > 0 && plan_.peak() > budget_)
    MS_FAIL("the device arena needs ", format_bytes(double(plan_.peak())), " (weight slots ",
            format_bytes(double(plan_.weight_slots)), ", activations ", format_bytes(double(plan_.workspace())),
            ") but ",
            o.device_memory > 0 ? cat("--device-memory is ", format_bytes(double(budget_)), "; pass --device-memory ",
                                      plan_.peak(), " or more (up to the device's memory), or ")
                                : cat("the device has ", format_bytes(double(budget_)),
                                      " for it (its memory less a reserve; --device-memory can give it more); "),
            "use ", o.offload_activations ? "" : "--offload-activations, ",
            "fewer frames, a smaller batch or --prefetch 2");
  const WorkspaceLayout layout = ao.layout(c, shapes);
  const int64_t align = ao.align();
  const int64_t workspace = runner_->workspace_bytes(layout, align);
  checkpoint_bytes_ = shapes.most([](const ModelDims& d) { return d.N(); }) * cfg_.dim * ao.act_bytes;
  if (o.offload_activations) {
    host_checkpoints_ = AlignedBuffer<char>(size_t(offloaded_checkpoints(c) * checkpoint_bytes_));
    if (host_checkpoints_.size()) be_.pin_host(host_checkpoints_.data(), host_checkpoints_.size());
  }
  arena_ = static_cast<char*>(be_.alloc_device(size_t(plan_.peak())));
  char* p = arena_;
  auto take = [&](int64_t bytes) {
    char* q = p;
    p += round_up(bytes, align);
    return q;
  };
  const int64_t stage = shards_.max_padded();
  for (int k = 0; k < o.prefetch; ++k) slots_.push_back(take(stage * ao.weight_bytes));
  for (int k = 0; k < ao.grad_slots; ++k) grad_slots_.push_back(reinterpret_cast<float*>(take(stage * 4)));
  MS_CHECK(p - arena_ == plan_.weight_slots + plan_.grad_slots, "arena plan and slots disagree");
  runner_->bind(p, layout, align);
  p += workspace;
  MS_CHECK(workspace == plan_.workspace(), "arena plan and layout disagree: ", workspace, " against ",
           plan_.workspace());
  const std::vector<int64_t> buffers = input_buffers(c, shapes);
  std::vector<float*> in;
  for (int64_t n : buffers) in.push_back(reinterpret_cast<float*>(take(n * 4)));
  for (int k = 0; k < 2; ++k)
    inputs_[k] = {in[size_t(4 * k)], in[size_t(4 * k + 1)], in[size_t(4 * k + 2)], in[size_t(4 * k + 3)], {}, {}, {}};
  velocity_ = in[8];
  dvelocity_ = in[9];
  MS_CHECK(p == arena_ + plan_.peak(), "arena carved ", p - arena_, " of ", plan_.peak(), " bytes");
  uses_ = slot_uses(int(table_.stages().size()), o.prefetch);
  held_.assign(size_t(o.prefetch), -1);
  forward_slot_free_.assign(size_t(o.prefetch), Event{});
  st_ = {be_.create_stream("compute", StreamKind::device), be_.create_stream("h2d", StreamKind::device),
         be_.create_stream("d2h", StreamKind::device)};
}

void* StreamedModel::checkpoint(int64_t k) const {
  return runner_->checkpoint(opts_.offload_activations || opts_.forward_only ? k % 3 : k);
}

StreamedModel::~StreamedModel() {
  be_.sync_all();
  be_.free_device(arena_);
  if (host_checkpoints_.size()) be_.unpin_host(host_checkpoints_.data());
}

void StreamedModel::enqueue_inputs(const ModelDims& d, const float* xt, const float* t, const float* context,
                                   const float* target) {
  MS_CHECK(shapes_.fits(d), "a step of ", d.B, " x ", d.F, "x", d.H, "x", d.W, " does not fit the arena's shapes");
  const int64_t video = d.B * d.F * d.H * d.W;
  current_ ^= 1;
  Inputs& in = inputs_[current_];
  be_.wait(st_.h2d, in.free);
  in.dims = d;
  // context is padded to text_len by the caller
  be_.copy_h2d(st_.h2d, in.xt, xt, size_t(video * cfg_.in_dim) * 4, "inputs");
  in.has_target = target != nullptr;
  if (target) be_.copy_h2d(st_.h2d, in.target, target, size_t(video * cfg_.out_dim) * 4, "inputs");
  be_.copy_h2d(st_.h2d, in.context, context, size_t(d.B * d.Lt * cfg_.text_dim) * 4, "inputs");
  be_.copy_h2d(st_.h2d, in.t, t, size_t(d.Bt()) * 4, "inputs");
  in.landed = be_.record(st_.h2d);
}

void StreamedModel::enqueue_step(const uint16_t* weights, const GradRoute& route,
                                 const std::function<Event(int)>& ready, std::span<const float> rank_weight) {
  MS_CHECK(opts_.ranks == 1 || int(rank_weight.size()) == opts_.ranks, "a step of ", opts_.ranks, " ranks needs ",
           opts_.ranks, " rank weights, got ", rank_weight.size());
  const std::vector<float> weight(rank_weight.begin(), rank_weight.end());
  held_from_ = nullptr;  // the slots get this step's stages
  const auto& stages = table_.stages();
  const int S = int(stages.size()), L = int(cfg_.num_layers);
  Inputs& in = inputs_[current_];
  MS_CHECK(!opts_.forward_only && in.has_target, "StreamedModel: a training step needs gradient slots and a target");
  be_.wait(st_.compute, in.landed);
  // The compute stream's ops (empty with skip_compute: the benchmark's transfer-only time).
  auto compute = [&](const char* name, std::function<void()> fn) {
    be_.launch(st_.compute, name, opts_.skip_compute ? std::function<void()>([] {}) : std::move(fn));
  };
  StageRunner* r = runner_.get();
  const ModelDims dims = in.dims;  // set in the stem's launch, the step's first on the compute stream
  // one block input of this step (the checkpoint slots hold the largest shape's)
  const size_t checkpoint_bytes = size_t(dims.N() * cfg_.dim * r->act_bytes());
  std::vector<Event> slot_free(uses_.size()), grads_sent(uses_.size());
  const bool offload = opts_.offload_activations;
  // offload: checkpoint k saved on the host; block b's backward done (index L: the head's)
  std::vector<Event> saved(size_t(L + 1)), backward_done(size_t(L + 1));
  int backward_index = 0;
  for (size_t i = 0; i < uses_.size(); ++i) {
    const SlotUse& use = uses_[i];
    const int s = use.stage;
    const StageInfo& info = stages[size_t(s)];
    char* w = slots_[size_t(use.slot)];
    // H2D: the slot must be free (its previous user finished) and, on first use, the stage updated. A slot
    // that still holds this stage from earlier in the step keeps it (slot_uses).
    if (!use.resident) {
      if (use.previous >= 0) be_.wait(st_.h2d, slot_free[size_t(use.previous)]);
      if (opts_.serialize && i > 0) {
        be_.wait(st_.h2d, slot_free[i - 1]);
        be_.wait(st_.h2d, be_.record(st_.d2h));
      }
      if (int(i) == s) be_.wait(st_.h2d, ready(s));
      const StageShard& sh = shards_.stage(size_t(s));
      if (opts_.ranks == 1) {
        be_.upload_weights(st_.h2d, w, weights + info.offset, info.numel, "weights");
      } else {  // this rank's chunk, then everyone's
        const int64_t wb = be_.weight_bytes(), at = shards_.rank() * sh.chunk;
        be_.upload_weights(st_.h2d, w + at * wb, weights + sh.offset, sh.count, "weights");
        be_.launch(st_.h2d, "all-gather", [=, this] {
          if (device_)
            device_->allgather(Channel::weights, w, size_t(sh.chunk * wb));
          else
            comm_->allgather(Channel::weights, w, size_t(sh.chunk * wb));
        });
      }
      be_.wait(st_.compute, be_.record(st_.h2d));
    }
    const bool forward = int(i) < S - 1;
    float* g = nullptr;
    if (!forward) {  // the head and every backward use write a gradient slot
      const int j = backward_index++;
      g = grad_slots_[size_t(j % 2)];
      if (j >= 2) be_.wait(st_.compute, grads_sent[size_t(j - 2)]);
    }
    const void* cw = w;
    const StepInputs inputs{in.xt, in.t, in.context, in.target};
    if (info.kind == StageKind::stem && forward) {
      compute("stem", [=, this] {
        r->set_dims(dims);
        r->stem_forward(cw, inputs, checkpoint(0));
      });
    } else if (info.kind == StageKind::block && forward) {
      const int64_t b = info.block;
      if (offload && b >= 2) be_.wait(st_.compute, saved[size_t(b - 2)]);  // staging slot of xs[b+1] drained
      compute("block", [=, this] { r->block_forward(b, cw, checkpoint(b), checkpoint(b + 1)); });
    } else if (info.kind == StageKind::head) {
      compute("head", [=, this] { r->head_step(cw, checkpoint(L), inputs, velocity_, dvelocity_, g); });
    } else if (info.kind == StageKind::block) {
      const int64_t b = info.block;
      if (offload && b <= L - 3) {  // xs[b] comes back into its staging slot once block b+3 (L: the head) has
        // read xs[b+3] there and any save of xs[b+3] has read it too (the last three are never saved: their
        // events are complete; StreamOrder checks every such pair)
        be_.wait(st_.h2d, backward_done[size_t(b + 3)]);
        be_.wait(st_.h2d, saved[size_t(b + 3)]);
        be_.copy_h2d(st_.h2d, checkpoint(b), host_checkpoint(b), checkpoint_bytes, "checkpoint");
        be_.wait(st_.compute, be_.record(st_.h2d));
      }
      compute("block backward", [=, this] { r->block_backward(b, cw, checkpoint(b), g); });
    } else {
      compute("stem backward", [=] { r->stem_backward(cw, g); });
    }
    slot_free[i] = be_.record(st_.compute);
    if (info.kind == StageKind::head) backward_done[size_t(L)] = slot_free[i];
    if (info.kind == StageKind::block && !forward) backward_done[size_t(info.block)] = slot_free[i];
    const int64_t k = info.kind == StageKind::stem ? 0 : info.block + 1;  // the checkpoint a forward use writes
    if (offload && forward && info.kind != StageKind::head && k < offloaded_checkpoints(cfg_)) {  // to the host
      be_.wait(st_.d2h, slot_free[i]);
      be_.copy_d2h(st_.d2h, host_checkpoint(k), checkpoint(k), checkpoint_bytes, "checkpoint");
      saved[size_t(k)] = be_.record(st_.d2h);
    }
    if (g) {
      const int j = backward_index - 1;
      float* host = route.buffer(j, s);
      be_.wait(st_.d2h, slot_free[i]);
      be_.wait(st_.d2h, route.free(j));
      if (opts_.ranks == 1) {
        be_.copy_d2h(st_.d2h, host, g, size_t(info.numel) * 4, "grads");
      } else {  // everyone's sum into this rank's chunk, then that chunk
        const StageShard& sh = shards_.stage(size_t(s));
        be_.launch(st_.d2h, "reduce-scatter", [=, this] {
          if (device_)
            device_->reduce_scatter(Channel::grads, g, sh.chunk, weight);
          else
            comm_->reduce_scatter(Channel::grads, g, sh.chunk, weight);
        });
        be_.copy_d2h(st_.d2h, host, g + shards_.rank() * sh.chunk, size_t(sh.count) * 4, "grads");
      }
      grads_sent[size_t(j)] = be_.record(st_.d2h);
      route.landed(j, s, host, grads_sent[size_t(j)]);
    }
  }
  in.free = be_.record(st_.compute);
}

void StreamedModel::enqueue_forward(const uint16_t* weights, float* velocity) {
  MS_CHECK(opts_.ranks == 1, "StreamedModel::enqueue_forward runs one rank");
  const auto& stages = table_.stages();
  const int S = int(stages.size()), K = opts_.prefetch;
  const int64_t L = cfg_.num_layers;
  Inputs& in = inputs_[current_];
  be_.wait(st_.compute, in.landed);
  if (held_from_ != weights) {
    held_.assign(size_t(K), -1);
    held_from_ = weights;
  }
  forward_uploads_ = 0;
  StageRunner* r = runner_.get();
  const ModelDims dims = in.dims;
  const StepInputs inputs{in.xt, in.t, in.context, in.target};
  for (int s = 0; s < S; ++s) {
    const size_t slot = size_t(s % K);
    const StageInfo& info = stages[size_t(s)];
    if (held_[slot] != s) {  // the slot's previous stage (of this forward or an earlier one) is done with
      be_.wait(st_.h2d, forward_slot_free_[slot]);
      be_.upload_weights(st_.h2d, slots_[slot], weights + info.offset, info.numel, "weights");
      held_[slot] = s;
      forward_uploads_ += info.numel;
      be_.wait(st_.compute, be_.record(st_.h2d));
    }
    const void* w = slots_[slot];
    if (info.kind == StageKind::stem) {
      be_.launch(st_.compute, "stem", [=, this] {
        r->set_dims(dims);
        r->stem_forward(w, inputs, checkpoint(0));
      });
    } else if (info.kind == StageKind::block) {
      const int64_t b = info.block;
      be_.launch(st_.compute, "block", [=, this] { r->block_forward(b, w, checkpoint(b), checkpoint(b + 1)); });
    } else {
      be_.launch(st_.compute, "head", [=, this] { r->head_forward(w, checkpoint(L), velocity_); });
    }
    forward_slot_free_[slot] = be_.record(st_.compute);
  }
  be_.wait(st_.d2h, forward_slot_free_[size_t((S - 1) % K)]);
  be_.copy_d2h(st_.d2h, velocity, velocity_, size_t(dims.B * cfg_.out_dim * dims.F * dims.H * dims.W) * 4, "velocity");
  in.free = be_.record(st_.d2h);
}

int64_t StreamedModel::uploaded_weights() const {
  int64_t n = 0;
  for (const SlotUse& u : uses_)
    if (!u.resident) n += shards_.stage(size_t(u.stage)).count;
  return n;
}

double StreamedModel::finish() {
  be_.sync_all();
  return runner_->loss();
}

}  // namespace ms
