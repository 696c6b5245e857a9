// `megaslide op adamw`: one torch.optim.AdamW update (decoupled weight decay) on tensors read from a
// safetensors file, through the same SIMD kernel the trainer uses.
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/check.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "train/adamw.h"

namespace ms::cli {
namespace {

struct OpAdamWArgs {
  std::string inputs, out;
  double lr = 1e-3;  // torch.optim.AdamW defaults
  AdamWConfig adamw;
  int64_t step = 1;
};

void validate(const OpAdamWArgs& a) {
  if (a.step < 1) MS_FAIL("--step is the 1-based index of this update and must be >= 1, got ", a.step);
  if (!(a.lr >= 0)) MS_FAIL("--lr must be >= 0, got ", a.lr);
  if (!(a.adamw.beta1 >= 0 && a.adamw.beta1 < 1)) MS_FAIL("--beta1 must be in [0, 1), got ", a.adamw.beta1);
  if (!(a.adamw.beta2 >= 0 && a.adamw.beta2 < 1)) MS_FAIL("--beta2 must be in [0, 1), got ", a.adamw.beta2);
  if (!(a.adamw.eps >= 0)) MS_FAIL("--eps must be >= 0, got ", a.adamw.eps);
  if (!(a.adamw.weight_decay >= 0)) MS_FAIL("--weight-decay must be >= 0, got ", a.adamw.weight_decay);
}

// Tensor `name` of f: present, F32, and with the shape of `like` when given.
const TensorEntry& input(const SafetensorsFile& f, const std::string& name, const TensorEntry* like) {
  const TensorEntry* e = f.find(name);
  if (!e) MS_FAIL(f.path(), ": missing tensor '", name, "' (op adamw needs param, grad, exp_avg, exp_avg_sq)");
  if (e->dtype != DType::f32) MS_FAIL(f.path(), ": tensor '", name, "' is ", dtype_name(e->dtype), ", expected F32");
  if (like && e->shape != like->shape)
    MS_FAIL(f.path(), ": tensor '", name, "' has shape ", shape_str(e->shape), " but '", like->name, "' has ",
            shape_str(like->shape));
  return *e;
}

std::vector<float> values(const TensorEntry& e) {
  std::vector<float> x(size_t(numel(e.shape)));
  read_as_f32(e, x.data());
  return x;
}

void op_adamw(const OpAdamWArgs& a) {
  validate(a);
  const SafetensorsFile f = SafetensorsFile::open(a.inputs);
  const TensorEntry& p = input(f, "param", nullptr);
  const TensorEntry &g = input(f, "grad", &p), &m = input(f, "exp_avg", &p), &v = input(f, "exp_avg_sq", &p);
  std::vector<float> param = values(p), exp_avg = values(m), exp_avg_sq = values(v);  // [p.shape]
  const std::vector<float> grad = values(g);                                          // [p.shape]
  std::vector<uint16_t> param_bf16(param.size());                                     // [p.shape]
  adamw_update(a.adamw, a.lr, a.step, 1.0f, grad.data(), param.data(), exp_avg.data(), exp_avg_sq.data(),
               param_bf16.data(), int64_t(param.size()));
  write_safetensors(a.out, {{"param", DType::f32, p.shape, param.data()},
                            {"exp_avg", DType::f32, p.shape, exp_avg.data()},
                            {"exp_avg_sq", DType::f32, p.shape, exp_avg_sq.data()},
                            {"param_bf16", DType::bf16, p.shape, param_bf16.data()}});
  log_info("op adamw: step ", a.step, " on ", param.size(), " elements (", adamw_simd_target(), ") -> ", a.out);
}

}  // namespace

void add_op_adamw(CLI::App& op) {
  auto a = std::make_shared<OpAdamWArgs>();
  CLI::App* cmd = op.add_subcommand("adamw", "One torch.optim.AdamW update of param, grad, exp_avg, exp_avg_sq");
  cmd->add_option("--inputs", a->inputs, "Safetensors with f32 param, grad, exp_avg, exp_avg_sq of one shape")
      ->required();
  cmd->add_option("--out", a->out, "Output safetensors: param, exp_avg, exp_avg_sq (F32), param_bf16 (BF16)")
      ->required();
  cmd->add_option("--lr", a->lr, "Learning rate")->capture_default_str();
  cmd->add_option("--beta1", a->adamw.beta1, "First-moment decay")->capture_default_str();
  cmd->add_option("--beta2", a->adamw.beta2, "Second-moment decay")->capture_default_str();
  cmd->add_option("--eps", a->adamw.eps, "Denominator epsilon")->capture_default_str();
  cmd->add_option("--weight-decay", a->adamw.weight_decay, "Decoupled weight decay")->capture_default_str();
  cmd->add_option("--step", a->step, "1-based index of this update (bias correction)")->capture_default_str();
  cmd->callback([a] { op_adamw(*a); });
}

}  // namespace ms::cli
