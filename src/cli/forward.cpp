// `megaslide forward`: one forward (and optionally backward) pass of a model on inputs from a file.
#include <memory>

#include "backend/cpu/resident_model.h"
#include "cli/commands.h"
#include "core/check.h"
#include "core/log.h"
#include "core/memory_usage.h"
#include "io/safetensors.h"
#include "model/loader.h"

namespace ms::cli {
namespace {

struct ForwardArgs {
  std::string model, config, inputs, out;
  BackendChoice backend = BackendChoice::automatic;
  bool backward = false;
  uint64_t seed = 0;
  int64_t host_memory = 0;  // --host-memory; 0: detected
};

std::vector<float> read_input(const SafetensorsFile& f, const std::string& name, const Shape& want_prefix, size_t rank,
                              Shape* shape) {
  const TensorEntry* e = f.find(name);
  if (!e) MS_FAIL(f.path(), ": input '", name, "' is missing");
  if (e->shape.size() != rank) MS_FAIL(f.path(), ": '", name, "' must have ", rank, " dims, got ", shape_str(e->shape));
  for (size_t i = 0; i < want_prefix.size(); ++i)
    if (want_prefix[i] >= 0 && e->shape[i] != want_prefix[i])
      MS_FAIL(f.path(), ": '", name, "' has shape ", shape_str(e->shape), "; dim ", i, " must be ", want_prefix[i]);
  std::vector<float> v(size_t(numel(e->shape)));
  read_as_f32(*e, v.data());
  *shape = e->shape;
  return v;
}

void run_forward(const ForwardArgs& a) {
  ModelSource src = resolve_model(a.model, a.config);
  const ModelConfig& c = src.config;
  SafetensorsFile in = SafetensorsFile::open(a.inputs);
  Shape ls, ts, cs;
  auto latents = read_input(in, "latents", {-1, c.in_dim}, 5, &ls);
  const int64_t B = ls[0];
  auto t = read_input(in, "timestep", {B}, 1, &ts);
  auto ctx = read_input(in, "context", {B, -1, c.text_dim}, 3, &cs);
  ModelDims d = ModelDims::make(c, B, ls[2], ls[3], ls[4], cs[1]);
  ParamTable table(c);
  const int64_t vbytes = 4 * B * c.out_dim * d.F * d.H * d.W;  // the velocity (and its gradient)
  require_host_memory(
      cat("the ", a.backward ? "forward and backward" : "forward", " of ", src.description),
      4 * table.total() * (a.backward ? 2 : 1) + ResidentModel<float>::workspace_bytes(c, d) +
          vbytes * (a.backward ? 2 : 1) + (a.backward ? 4 * int64_t(latents.size() + ctx.size()) : 0),
      a.backward ? "f32 weights and gradients, the model's workspace" : "f32 weights, the model's workspace",
      host_limit(a.host_memory), "Use fewer frames, a smaller size or batch");
  AlignedBuffer<float> params(size_t(table.total()));
  load_params(src, table, a.seed, params.data());
  ResidentModel<float> model(c, d);
  const Shape vshape{B, c.out_dim, d.F, d.H, d.W};
  std::vector<float> velocity(size_t(numel(vshape)));
  model.forward(params.data(), latents.data(), t.data(), ctx.data(), velocity.data());
  std::vector<TensorRef> out{{"velocity", DType::f32, vshape, velocity.data()}};
  AlignedBuffer<float> grads;
  std::vector<float> dlat, dctx;
  if (a.backward) {
    Shape gs;
    auto dvel = read_input(in, "grad_velocity", vshape, 5, &gs);
    grads = AlignedBuffer<float>(size_t(table.total()));
    dlat.resize(latents.size());
    dctx.resize(ctx.size());
    model.backward(params.data(), dvel.data(), grads.data(), dlat.data(), dctx.data());
    for (const auto& p : table.params())
      out.push_back({"grad." + p.name, DType::f32, p.shape, grads.data() + p.offset});
    out.push_back({"grad.latents", DType::f32, ls, dlat.data()});
    out.push_back({"grad.context", DType::f32, cs, dctx.data()});
  }
  write_safetensors(a.out, out);
  log_info("wrote ", a.out, " (", out.size(), " tensors)");
}

}  // namespace

void add_forward_command(CLI::App& app) {
  auto a = std::make_shared<ForwardArgs>();
  CLI::App* cmd = app.add_subcommand("forward", "Run the model on inputs from a safetensors file");
  cmd->add_option("--model", a->model, "Model directory, weights file (with --config) or preset")->required();
  cmd->add_option("--config", a->config, "config.json for a weights file");
  cmd->add_option("--inputs", a->inputs,
                  "safetensors with latents [B,in_dim,F,H,W], timestep [B] (0..1000), context [B,Lc,text_dim]"
                  " (+ grad_velocity with --backward)")
      ->required();
  cmd->add_option("--out", a->out, "Output safetensors: velocity [B,out_dim,F,H,W] (+ grad.* with --backward)")
      ->required();
  cmd->add_flag("--backward", a->backward,
                "Also back-propagate grad_velocity: grad.<param>, grad.latents, grad.context");
  cmd->add_option("--seed", a->seed, "Initialisation seed when the model has no weights")->capture_default_str();
  add_backend_option(*cmd, a->backend);
  add_host_memory_option(*cmd, a->host_memory);
  cmd->callback([a] {
    resolve_backend(a->backend);
    run_forward(*a);
  });
}

}  // namespace ms::cli
