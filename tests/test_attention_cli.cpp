// The attention types through the binary: `megaslide op dense|window|dsa` gives the kernels' outputs and one clear
// error naming a bad value; `megaslide forward --backward` runs every type and writes the offset network's grads.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/param_table.h"
#include "ops/attention.h"
#include "ops/dsa.h"
#include "ops/window_attention.h"
#include "temp_dir.h"
#include "test_util.h"

namespace ms::test {
namespace {

const Shape kQkv{1, 3, 4, 5, 4, 6};  // [B, T, H, W, nh, d]
const VideoAttentionDims kAttnDims{1, 3, 4, 5, 4, 6};

struct OpFiles {
  std::vector<float> q, k, v, dout, off;
  Shape off_shape;
  // Writes q, k, v, grad_out and, when off_shape is given, offsets to `path`, minus tensor `drop`.
  OpFiles(const std::string& path, Shape offsets_shape = {}, const std::string& drop = "")
      : off_shape(std::move(offsets_shape)) {
    const size_t n = size_t(numel(kQkv));
    q = to_f32(randn(n, 1));
    k = to_f32(randn(n, 2));
    v = to_f32(randn(n, 3));
    dout = to_f32(randn(n, 4));
    std::vector<TensorRef> refs{{"q", DType::f32, kQkv, q.data()},
                                {"k", DType::f32, kQkv, k.data()},
                                {"v", DType::f32, kQkv, v.data()},
                                {"grad_out", DType::f32, kQkv, dout.data()}};
    if (!off_shape.empty()) {
      off = to_f32(randn(size_t(numel(off_shape)), 5, 1.5));
      refs.push_back({"offsets", DType::f32, off_shape, off.data()});
    }
    std::erase_if(refs, [&](const TensorRef& r) { return r.name == drop; });
    write_safetensors(path, refs);
  }
};

}  // namespace

TEST(OpCli, DsaOutputsAreTheKernelOutputs) {
  TempDir t;
  const DsaArgs a{{3, 2, 3}, 2};
  OpFiles in(t.file("in.safetensors"), {1, 3, 4, 5, 2, 18, 3});
  const CliResult r = run_cli("op dsa --inputs " + t.file("in.safetensors") + " --out " + t.file("out.safetensors") +
                              " --window 3,2,3");
  ASSERT_EQ(r.code, 0) << r.output;
  const size_t n = in.q.size();
  std::vector<float> out(n), lse(size_t(4 * 60)), dq(n), dk(n), dv(n), doff(in.off.size());
  const DsaParams<float> p{
      {in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(), in.dout.data(), dq.data(), dk.data(), dv.data()},
      in.off.data(),
      doff.data(),
      kAttnDims,
      a};
  cpu::dsa_forward(p);
  cpu::dsa_backward(p);
  const SafetensorsFile f = SafetensorsFile::open(t.file("out.safetensors"));
  EXPECT_EQ(f.find("grad_offsets")->shape, in.off_shape);
  EXPECT_EQ(tensor_values(f, "out"), out);  // the kernels are deterministic for any thread count: bitwise
  EXPECT_EQ(tensor_values(f, "grad_q"), dq);
  EXPECT_EQ(tensor_values(f, "grad_k"), dk);
  EXPECT_EQ(tensor_values(f, "grad_v"), dv);
  EXPECT_EQ(tensor_values(f, "grad_offsets"), doff);
}

TEST(OpCli, WindowAndDenseOutputsAreTheKernelOutputs) {
  TempDir t;
  OpFiles in(t.file("in.safetensors"));
  const size_t n = in.q.size();
  std::vector<float> out(n), lse(size_t(4 * 60)), dq(n), dk(n), dv(n);
  for (bool shift : {false, true}) {
    const CliResult r = run_cli("op window --inputs " + t.file("in.safetensors") + " --out " +
                                t.file("out.safetensors") + " --window 2,3,2" + (shift ? " --shift" : ""));
    ASSERT_EQ(r.code, 0) << r.output;
    std::fill(dq.begin(), dq.end(), 0.0f);
    std::fill(dk.begin(), dk.end(), 0.0f);
    std::fill(dv.begin(), dv.end(), 0.0f);
    const WindowAttentionParams<float> p{{in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(), in.dout.data(),
                                          dq.data(), dk.data(), dv.data()},
                                         kAttnDims,
                                         {2, 3, 2},
                                         shift};
    cpu::window_attention_forward(p);
    cpu::window_attention_backward(p);
    const SafetensorsFile f = SafetensorsFile::open(t.file("out.safetensors"));
    EXPECT_EQ(tensor_values(f, "out"), out) << "shift " << shift;
    EXPECT_EQ(tensor_values(f, "grad_k"), dk) << "shift " << shift;
  }
  const CliResult r =
      run_cli("op dense --inputs " + t.file("in.safetensors") + " --out " + t.file("dense.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  cpu::attention_forward<float>({{in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data()}, {1, 60, 60, 4, 6}});
  EXPECT_EQ(tensor_values(SafetensorsFile::open(t.file("dense.safetensors")), "out"), out);
}

TEST(OpCli, BadInputIsAClearErrorNamingTheValue) {
  TempDir t;
  const std::string good = t.file("good.safetensors"), out = " --out " + t.file("out.safetensors");
  OpFiles(good, {1, 3, 4, 5, 2, 18, 3});
  const std::string dsa = "op dsa --inputs " + good + out;
  expect_cli_error(run_cli(dsa), "--window kt,kh,kw is required");
  expect_cli_error(run_cli(dsa + " --window 3,0,3"), "--window '3,0,3' must be positive integers");
  expect_cli_error(run_cli(dsa + " --window 3,3"), "must be three comma-separated integers");
  expect_cli_error(run_cli(dsa + " --window 3,3,3"), "'offsets' has P = 18 slots but --window 3,3,3 has kt*kh*kw = 27");
  OpFiles(t.file("g3.safetensors"), {1, 3, 4, 5, 3, 18, 3});
  expect_cli_error(run_cli("op dsa --inputs " + t.file("g3.safetensors") + out + " --window 3,2,3"),
                   "4 heads are not divisible by the offset groups G = 3");
  OpFiles(t.file("nooff.safetensors"));
  expect_cli_error(run_cli("op dsa --inputs " + t.file("nooff.safetensors") + out + " --window 3,2,3"),
                   "input 'offsets' is missing");
  OpFiles(t.file("nok.safetensors"), {}, "k");
  expect_cli_error(run_cli("op window --inputs " + t.file("nok.safetensors") + out + " --window 2,2,2"),
                   "input 'k' is missing");
  std::vector<float> q(size_t(numel(kQkv))), small(10);
  write_safetensors(t.file("shape.safetensors"), {{"q", DType::f32, kQkv, q.data()},
                                                  {"k", DType::f32, {1, 10}, small.data()},
                                                  {"v", DType::f32, {1, 10}, small.data()}});
  expect_cli_error(run_cli("op dense --inputs " + t.file("shape.safetensors") + out), "'k' has shape [1, 10]");
}

// A dense Wan checkpoint run as every attention type: dsa adds its offset network (offset_proj zero) and says so,
// and back-propagates into it.
TEST(ForwardCli, BackwardRunsEveryAttentionTypeFromADenseCheckpoint) {
  ModelConfig c;
  c.dim = 12;
  c.ffn_dim = 16;
  c.num_heads = 2;
  c.num_layers = 2;
  c.in_dim = c.out_dim = 2;
  c.text_len = 3;
  c.text_dim = 5;
  c.freq_dim = 4;
  c.attention.window = {2, 2, 3};
  TempDir t;
  const ParamTable dense(c);
  const auto w = to_f32(randn(size_t(dense.total()), 7, 0.3));
  std::vector<TensorRef> refs;
  for (const auto& p : dense.params()) refs.push_back({p.name, DType::f32, p.shape, w.data() + p.offset});
  const Shape lat{1, 2, 3, 6, 8}, ctx{1, 2, 5};
  const auto l = to_f32(randn(size_t(numel(lat)), 1)), x = to_f32(randn(size_t(numel(ctx)), 2)),
             g = to_f32(randn(size_t(numel(lat)), 3));
  const std::vector<float> ts{500.0f};
  write_safetensors(t.file("in.safetensors"), {{"latents", DType::f32, lat, l.data()},
                                               {"timestep", DType::f32, {1}, ts.data()},
                                               {"context", DType::f32, ctx, x.data()},
                                               {"grad_velocity", DType::f32, lat, g.data()}});
  for (const char* type : {"dense", "window", "dsa", "dsa_fixed"}) {
    const std::filesystem::path dir = t.path / type;
    std::filesystem::create_directories(dir);
    c.attention.type = parse_name<AttentionType>(type, "test");
    std::ofstream((dir / "config.json").string()) << config_to_json(c).dump();
    write_safetensors((dir / "model.safetensors").string(), refs);
    const CliResult r = run_cli("forward --backward --model " + dir.string() + " --inputs " + t.file("in.safetensors") +
                                " --out " + t.file("out.safetensors"));
    ASSERT_EQ(r.code, 0) << type << ": " << r.output;
    const SafetensorsFile f = SafetensorsFile::open(t.file("out.safetensors"));
    const bool dsa = std::string(type) == "dsa";
    EXPECT_EQ(r.output.find("added 8 DSA offset parameters") != std::string::npos, dsa) << r.output;
    for (const char* name : {"grad.blocks.1.self_attn.offset_conv.weight", "grad.blocks.1.self_attn.offset_conv.bias",
                             "grad.blocks.1.self_attn.offset_proj.weight", "grad.blocks.1.self_attn.offset_proj.bias"})
      EXPECT_EQ(f.find(name) != nullptr, dsa) << type << " " << name;
    if (dsa) {  // offset_proj starts at zero, its gradient does not
      float mx = 0;
      for (float v : tensor_values(f, "grad.blocks.1.self_attn.offset_proj.weight")) mx = std::max(mx, std::fabs(v));
      EXPECT_GT(mx, 0.0f);
    }
  }
}

}  // namespace ms::test
