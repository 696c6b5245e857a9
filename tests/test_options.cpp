// The option table of `megaslide train` (train/option_table.h): each option's flag, check and trainer.json key,
// against options set field by field, the trainer.json a run wrote before the table existed, and the command line.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "core/check.h"
#include "file_util.h"
#include "train/option_table.h"

namespace ms::test {
namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// Every field away from its default, set by hand (not through the table).
TrainOptions unusual_options() {
  TrainOptions o;
  o.model = "wan2.1-1.3b", o.config = "/c/config.json", o.data = "/d/data.toml", o.mnist_dir = "/m";
  o.on_bad_data = BadDataPolicy::fatal;
  o.frames = 5, o.height = 40, o.width = 56, o.steps = 17, o.batch_size = 3, o.grad_accum = 4;
  o.lr = 3.5e-4, o.grad_clip = 0.25, o.warmup = 7;
  o.lr_scheduler = LrScheduler::cosine_with_restarts, o.lr_cycles = 3;
  o.adamw = {.beta1 = 0.85, .beta2 = 0.995, .eps = 1e-6, .weight_decay = 0.125};
  o.flow = {.sampling = TimestepSampling::sigmoid,
            .shift = 5.0,
            .sigmoid_scale = 1.25,
            .logit_mean = -0.5,
            .logit_std = 1.5,
            .min_timestep = 50,
            .max_timestep = 900};
  o.expert = Expert::low, o.boundary = 0.9;
  o.seed = 123456789012345ull, o.out = "/runs/x", o.save_every = 4, o.log_every = 3;
  o.save_every_epochs = 2, o.keep_last = 3, o.caption_dropout = 0.1, o.empty_prompt = "/e/empty_wan_te.safetensors";
  o.i2v_ratio = 0.25;
  o.t5 = "/t5.pth", o.tokenizer = "/spiece.model", o.t5_config = "/t5.json";
  o.save_format = SaveFormat::diffusers;
  o.samples = {.every = 6,
               .no_final = true,
               .prompts = "/p.txt",
               .steps = 9,
               .format = "mp4",
               .vae = "/v.pth",
               .vae_config = "/v.json",
               .prompt_list = {}};
  o.runtime.offload = Offload::stream, o.runtime.optimizer_schedule = ScheduleChoice::immediate, o.runtime.prefetch = 4;
  o.runtime.device_memory = 3 << 20, o.runtime.offload_activations = true, o.runtime.backend = BackendChoice::cpu,
  o.runtime.link_gbps = 12.5;
  o.trace = "/t.json", o.on_nonfinite = NonFinitePolicy::stop;
  o.runtime.host_memory = int64_t(20) << 30;
  o.runtime.recompute = Recompute::always;
  return o;
}

TEST(TrainOptions, EveryOptionIsSavedAndReadBack) {
  const TrainOptions o = unusual_options();
  const nlohmann::json saved = options_to_json(o), defaults = options_to_json(TrainOptions{});
  std::set<std::string> keys;
  size_t unsaved = 0;
  for (const TrainOption& t : train_option_table()) {
    keys.insert(t.key());
    if (!t.saved) {  // this machine's, not the run's: a run resumed elsewhere detects its own
      ++unsaved;
      EXPECT_FALSE(saved.contains(t.key())) << t.key();
      continue;
    }
    ASSERT_TRUE(saved.contains(t.key())) << t.key();
    EXPECT_NE(saved[t.key()], defaults[t.key()]) << t.key() << ": the field it saves is not the one set";
  }
  EXPECT_EQ(keys.size(), train_option_table().size()) << "two options share a key";
  EXPECT_EQ(unsaved, 2u);  // --host-memory, --collective-timeout
  EXPECT_EQ(saved.size(), keys.size() - unsaved);
  EXPECT_EQ(options_to_json(options_from_json(saved)), saved);
  EXPECT_EQ(options_from_json(saved).runtime.host_memory, 0);
  EXPECT_EQ(saved["lr"], 3.5e-4);
  EXPECT_EQ(saved["offload"], "stream");
  EXPECT_EQ(saved["backend"], "cpu");
  EXPECT_EQ(saved["sample_format"], "mp4");
  EXPECT_EQ(saved["seed"], 123456789012345ull);
}

// tests/data/trainer_json/options_v1.json: the "options" of a trainer.json written by megaslide before the option
// table (`train --steps 1 ... --sample-every 5 --offload stream --inject-nan-grad 9 ...`, paths replaced).
TEST(TrainOptions, RunsSavedBeforeTheTableResume) {
  nlohmann::json v1 = read_json(std::string(MEGASLIDE_TEST_DATA) + "/trainer_json/options_v1.json");
  v1["beta1"] = 0.85;  // the old keys of the AdamW betas (no flag set them then)
  v1["beta2"] = 0.995;
  const TrainOptions o = options_from_json(v1);
  EXPECT_EQ(o.adamw.beta1, 0.85);
  EXPECT_EQ(o.adamw.beta2, 0.995);
  EXPECT_EQ(o.samples.every, 5);  // "samples": {...} in the old layout
  EXPECT_EQ(o.samples.prompts, "/runs/prompts.txt");
  EXPECT_EQ(o.samples.steps, 3);
  EXPECT_EQ(o.samples.format, "mp4");
  EXPECT_EQ(o.on_bad_data, BadDataPolicy::fatal);
  EXPECT_EQ(o.save_format, SaveFormat::wan);
  EXPECT_EQ(o.runtime.offload, Offload::stream);
  EXPECT_EQ(o.runtime.optimizer_schedule, ScheduleChoice::immediate);
  EXPECT_EQ(o.on_nonfinite, NonFinitePolicy::stop);
  EXPECT_EQ(o.flow.sampling, TimestepSampling::uniform_shift);  // the formula it was trained with
  EXPECT_EQ(o.flow.shift, 2.5);
  EXPECT_EQ(o.runtime.device_memory, 512 << 20);
  EXPECT_EQ(o.runtime.link_gbps, 16.0);
  EXPECT_EQ(o.runtime.prefetch, 3);
  EXPECT_EQ(o.seed, 7u);
  EXPECT_EQ(o.lr, 0.001);
  EXPECT_EQ(o.frames, 1);
  EXPECT_EQ(o.out, "/runs/before-the-option-table");
  // The testing aid the old run saved is not carried on: aids are never part of a run.
  EXPECT_FALSE(options_to_json(o).contains("inject_nan_grad"));
  EXPECT_EQ(o.adamw.weight_decay, 0.02);
  // No lr_scheduler key: the constant rate after the warm-up it ran with, not today's default.
  ASSERT_FALSE(v1.contains("lr_scheduler"));
  EXPECT_EQ(o.lr_scheduler, LrScheduler::constant_with_warmup);
  EXPECT_NE(TrainOptions{}.lr_scheduler, LrScheduler::constant_with_warmup);
}

TEST(TrainOptions, DamagedTrainerJsonNamesTheKey) {
  const nlohmann::json good = options_to_json(unusual_options());
  auto read_with = [&](auto&& edit) {
    nlohmann::json j = good;
    edit(j);
    return error_of([&] { options_from_json(j); });
  };
  EXPECT_EQ(read_with([](nlohmann::json& j) { j.erase("lr"); }),
            "trainer.json: options.lr is missing; the checkpoint is damaged");
  EXPECT_NE(read_with([](nlohmann::json& j) { j["lr"] = "fast"; }).find("trainer.json: options.lr has the wrong type"),
            std::string::npos);
  EXPECT_EQ(read_with([](nlohmann::json& j) { j["offload"] = "disk"; }),
            "trainer.json: options.offload 'disk' is unknown; use none or stream");
  EXPECT_NE(read_with([](nlohmann::json& j) { j["offload"] = 3; }).find("must be one of none or stream"),
            std::string::npos);
  EXPECT_EQ(read_with([](nlohmann::json& j) { j.erase("on_nonfinite"); }), "no error");  // optional: a default
}

TEST(TrainOptions, ChecksNameTheFlagAndTheValue) {
  auto check = [](auto&& edit) {
    TrainOptions o;
    edit(o);
    return error_of([&] { o.validate(); });
  };
  EXPECT_EQ(check([](TrainOptions&) {}), "no error");
  EXPECT_EQ(check([](TrainOptions& o) { o.lr = 0; }), "--lr must be positive, got 0");
  EXPECT_EQ(check([](TrainOptions& o) { o.frames = -2; }), "--frames must be >= 0, got -2");
  EXPECT_EQ(check([](TrainOptions& o) { o.adamw.beta2 = 1; }), "--adam-beta2 must be in [0, 1), got 1");
  EXPECT_EQ(check([](TrainOptions& o) { o.runtime.prefetch = 1; }),
            "--prefetch is below 2: one weight slot computes while another loads, got 1");
  EXPECT_EQ(check([](TrainOptions& o) { o.out.clear(); }), "--out must name a run directory, got ");
  EXPECT_NE(check([](TrainOptions& o) { o.runtime.link_gbps = 5; }).find("apply to --offload stream"),
            std::string::npos);
}

TEST(TrainOptions, CommandLineTakesEveryFlagAndRefusesBadValues) {
  const CliResult help = run_cli("train --help");
  ASSERT_EQ(help.code, 0) << help.output;
  for (const TrainOption& t : train_option_table())
    EXPECT_NE(help.output.find(t.flag), std::string::npos) << t.flag << " is not in train --help";
  EXPECT_EQ(help.output.find("--inject-"), std::string::npos) << "testing aids are hidden";
  for (auto [args, message] :
       {std::pair{"--lr abc", "--lr expects a finite number, got 'abc'"},
        {"--steps 2x", "--steps expects an integer, got '2x'"},
        {"--offload disk", "--offload 'disk' is unknown; use none or stream"},
        {"--device-memory 0", "--device-memory '0' leaves no room for the arena"},
        {"--resume /nonexistent/run --lr 1", "only --steps and --host-memory may be given, not --lr, --out"},
        {"--host-memory 0", "--host-memory must be positive, got '0'"},
        {"--host-memory lots", "--host-memory 'lots' is not a byte size"},
        {"--timestep-sampling beta",
         "--timestep-sampling 'beta' is unknown; use uniform, sigmoid, logit_normal, shift, "
         "flux_shift or uniform_shift"},
        {"--shift -1", "--discrete-flow-shift must be positive, got -1"},
        {"--min-timestep 500 --max-timestep 400", "must satisfy 0 <= min < max <= 1000"}}) {
    const CliResult r = run_cli(std::string("train --out /nonexistent/never ") + args);
    EXPECT_EQ(r.code, 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace ms::test
