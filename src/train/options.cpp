#include "train/options.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "model/config.h"
#include "model/export.h"
#include "registry/registry.h"

namespace ms {

void TrainOptions::make_paths_absolute() {
  auto absolute = [](std::string& p) {
    if (!p.empty()) p = std::filesystem::absolute(p).lexically_normal().string();
  };
  if (data != "synthetic" && data != "moving-mnist") absolute(data);
  for (std::string* p : {&mnist_dir, &trace, &samples.prompts, &out}) absolute(*p);
}

void TrainOptions::validate() const {
  if (frames < 0 || height < 0 || width < 0)
    MS_FAIL("--frames/--height/--width must be positive, got ", frames, "x", height, "x", width);
  if (steps < 0) MS_FAIL("--steps must be >= 0, got ", steps);
  if (batch_size < 0) MS_FAIL("--batch-size must be positive, got ", batch_size);
  if (on_bad_data != "skip" && on_bad_data != "fatal")
    MS_FAIL("--on-bad-data '", on_bad_data, "' is unknown; use skip (log and leave the file out) or fatal");
  if (!(lr > 0)) MS_FAIL("--lr must be positive, got ", lr);
  if (!(grad_clip >= 0)) MS_FAIL("--grad-clip must be >= 0 (0 disables clipping), got ", grad_clip);
  if (warmup < 0) MS_FAIL("--warmup must be >= 0, got ", warmup);
  if (save_every < 0) MS_FAIL("--save-every must be >= 0 (0 saves only at the end), got ", save_every);
  parse_save_format(save_format, "--save-format");
  if (log_every <= 0) MS_FAIL("--log-every must be positive, got ", log_every);
  if (!(adamw.weight_decay >= 0)) MS_FAIL("--weight-decay must be >= 0, got ", adamw.weight_decay);
  if (out.empty()) MS_FAIL("--out must name a run directory");
  if (offload != "none" && offload != "stream") MS_FAIL("--offload '", offload, "' is unknown; use none or stream");
  if (optimizer_schedule != "deferred" && optimizer_schedule != "immediate")
    MS_FAIL("--optimizer-schedule '", optimizer_schedule, "' is unknown; use deferred or immediate");
  if (prefetch < 2) MS_FAIL("--prefetch ", prefetch, " is below 2: one weight slot computes while another loads");
  if (device_memory < 0) MS_FAIL("--device-memory must be >= 0");
  if (!(link_gbps >= 0)) MS_FAIL("--link-gbps must be >= 0 (0: unthrottled), got ", link_gbps);
  if (offload == "none" && (device_memory > 0 || link_gbps > 0 || offload_activations))
    MS_FAIL("--device-memory, --link-gbps and --offload-activations apply to --offload stream; add --offload stream");
  if (backend != "auto" && backend != "cpu" && backend != "cuda")
    MS_FAIL("--backend '", backend, "' is unknown; use cpu, cuda or auto");
  if (const std::string gpu = backend == "cuda" ? backend_unavailable("cuda") : ""; !gpu.empty())
    MS_FAIL("--backend cuda: ", gpu, "; or use --backend cpu");
  if (on_nonfinite != "skip" && on_nonfinite != "stop")
    MS_FAIL("--on-nonfinite '", on_nonfinite, "' is unknown; use skip (skip the step, keep training) or stop");
  ms::validate(flow);
  ms::validate(samples);
}

std::string resolve_backend(const TrainOptions& o, const ModelConfig& c) {
  if (o.backend == "cpu") return "cpu";
  const std::string why = [&]() -> std::string {  // what keeps this run off the GPU
    if (std::string gpu = backend_unavailable("cuda"); !gpu.empty()) return gpu;
    if (o.offload != "stream")
      return "the resident schedule (--offload none) runs on the CPU backend; add --offload stream";
    if (std::string kernels = stage_runner_refuses("cuda", c); !kernels.empty()) return kernels;
    if (o.link_gbps > 0) return "--link-gbps emulates a host link on the CPU backend";
    if (o.inject_nan_activation > 0)
      return "--inject-nan-activation poisons activations in host memory, on the CPU backend";
    return "";
  }();
  if (why.empty()) return "cuda";
  if (o.backend == "cuda") MS_FAIL("--backend cuda: ", why, "; or use --backend cpu");
  return "cpu";
}

double TrainOptions::lr_at(int64_t t) const { return warmup > 0 ? lr * std::min(1.0, double(t) / double(warmup)) : lr; }

nlohmann::json options_to_json(const TrainOptions& o) {
  return {{"model", o.model},
          {"config", o.config},
          {"data", o.data},
          {"mnist_dir", o.mnist_dir},
          {"on_bad_data", o.on_bad_data},
          {"frames", o.frames},
          {"height", o.height},
          {"width", o.width},
          {"steps", o.steps},
          {"batch_size", o.batch_size},
          {"lr", o.lr},
          {"grad_clip", o.grad_clip},
          {"warmup", o.warmup},
          {"beta1", o.adamw.beta1},
          {"beta2", o.adamw.beta2},
          {"adam_eps", o.adamw.eps},
          {"weight_decay", o.adamw.weight_decay},
          {"timestep_sampling", o.flow.sampling},
          {"shift", o.flow.shift},
          {"logit_mean", o.flow.logit_mean},
          {"logit_std", o.flow.logit_std},
          {"seed", o.seed},
          {"out", o.out},
          {"save_every", o.save_every},
          {"save_format", o.save_format},
          {"log_every", o.log_every},
          {"samples", train_samples_to_json(o.samples)},
          {"offload", o.offload},
          {"optimizer_schedule", o.optimizer_schedule},
          {"prefetch", o.prefetch},
          {"device_memory", o.device_memory},
          {"offload_activations", o.offload_activations},
          {"link_gbps", o.link_gbps},
          {"backend", o.backend},
          {"trace", o.trace},
          {"on_nonfinite", o.on_nonfinite},
          {"inject_nan_grad", o.inject_nan_grad},
          {"inject_nan_activation", o.inject_nan_activation},
          {"inject_inf_data", o.inject_inf_data},
          {"inject_data_error", o.inject_data_error},
          {"serialize", o.serialize},
          {"transfer_only", o.transfer_only}};
}

TrainOptions options_from_json(const nlohmann::json& j) {
  TrainOptions o;
  o.model = j.at("model");
  o.config = j.at("config");
  o.data = j.at("data");
  o.mnist_dir = j.value("mnist_dir", "");  // absent in checkpoints written before real data
  o.on_bad_data = j.value("on_bad_data", "skip");
  o.frames = j.at("frames");
  o.height = j.at("height");
  o.width = j.at("width");
  o.steps = j.at("steps");
  o.batch_size = j.at("batch_size");
  o.lr = j.at("lr");
  o.grad_clip = j.at("grad_clip");
  o.warmup = j.at("warmup");
  o.adamw.beta1 = j.at("beta1");
  o.adamw.beta2 = j.at("beta2");
  o.adamw.eps = j.at("adam_eps");
  o.adamw.weight_decay = j.at("weight_decay");
  o.flow.sampling = j.at("timestep_sampling");
  o.flow.shift = j.at("shift");
  o.flow.logit_mean = j.at("logit_mean");
  o.flow.logit_std = j.at("logit_std");
  o.seed = j.at("seed");
  o.out = j.at("out");
  o.save_every = j.at("save_every");
  o.save_format = j.value("save_format", std::string("megaslide"));  // absent in runs saved before it existed
  o.log_every = j.at("log_every");
  o.samples = train_samples_from_json(j.value("samples", nlohmann::json::object()));
  o.offload = j.at("offload");
  o.optimizer_schedule = j.at("optimizer_schedule");
  o.prefetch = j.at("prefetch");
  o.device_memory = j.at("device_memory");
  o.offload_activations = j.at("offload_activations");
  o.backend = j.value("backend", std::string("auto"));  // runs saved before the option had none
  o.link_gbps = j.at("link_gbps");
  o.trace = j.at("trace");
  o.inject_nan_grad = j.at("inject_nan_grad");
  o.on_nonfinite = j.value("on_nonfinite", "skip");  // absent in checkpoints written before it existed
  o.inject_nan_activation = j.value("inject_nan_activation", int64_t(0));
  o.inject_inf_data = j.value("inject_inf_data", int64_t(-1));
  o.inject_data_error = j.value("inject_data_error", int64_t(-1));
  o.serialize = j.at("serialize");
  o.transfer_only = j.value("transfer_only", false);
  return o;
}

}  // namespace ms
