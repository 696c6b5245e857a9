// The VAE in the pipeline: `megaslide cache` writes musubi-tuner's latent cache from a dataset of videos (and the
// training data reader takes it back), `sample --vae` and `train --sample-every --vae` decode latent samples into
// videos.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "core/dtype.h"
#include "data/dataset.h"
#include "data/video_clips.h"
#include "file_util.h"
#include "io/safetensors.h"
#include "io/video.h"
#include "model/config.h"
#include "model/param_table.h"
#include "model/vae_weights.h"
#include "temp_dir.h"
#include "test_util.h"
#include "train/memory_fit.h"
#include "vae/vae_model.h"
#include "video_util.h"

namespace ms::test {
namespace {

namespace fs = std::filesystem;

// A latent model (16 channels, Wan's text width) in dir/config.json.
ModelConfig latent_config() {
  ModelConfig c;
  c.dim = 16, c.ffn_dim = 24, c.num_heads = 2, c.num_layers = 2, c.freq_dim = 8;
  c.in_dim = c.out_dim = 16, c.text_dim = 4096, c.text_len = 8;
  c.patch_size = {1, 2, 2};
  c.validate();
  return c;
}

void latent_model(const TempDir& dir) {
  std::ofstream(dir.file("config.json")) << config_to_json(latent_config()).dump();
}

// The video file holds `frames` frames of height x width.
void expect_video(const std::string& path, int64_t frames, int64_t height, int64_t width) {
  const VideoInfo info = probe_video(path);
  EXPECT_EQ(info.frames, frames) << path;
  EXPECT_EQ(info.height, height) << path;
  EXPECT_EQ(info.width, width) << path;
}

}  // namespace

// Two 9-frame 20x36 videos, sliding 5-frame clips at frames 0 and 4, resized and cropped to 16x32, and a corrupt
// file: four latent files named as musubi-tuner names them, its key, dtype and metadata, each the VAE's encoding of
// the clip the training data path loads; the corrupt file named and skipped; a second run writes nothing.
TEST(VaePipeline, CacheWritesMusubisLatentCache) {
  TempDir dir;
  fs::create_directories(dir.file("videos"));
  for (const char* name : {"a", "b"}) {
    encode_video(dir.file(cat("videos/", name, ".mp4")), smooth_clip(9, 20, 36, name[0]));
    std::ofstream(dir.file(cat("videos/", name, ".txt"))) << "a clip called " << name;
  }
  write_bytes(dir.file("videos/c.mp4"), "not a video at all");
  std::ofstream(dir.file("videos/c.txt")) << "broken";
  std::ofstream(dir.file("data.toml")) << "[[datasets]]\nvideo_directory = \"videos\"\ncache_directory = \"cache\"\n"
                                          "resolution = [32, 16]\ntarget_frames = [5]\nframe_extraction = \"slide\"\n"
                                          "frame_stride = 4\n";
  auto r = run_cli("cache --backend cpu --data " + dir.file("data.toml") + " " + kVaeArgs);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("c.mp4"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cached 4 clips, 0 were cached already"), std::string::npos) << r.output;

  const VaeWeights w = VaeWeights::load(kVaeData + "tiny_vae.pth", kVaeData + "tiny_config.json");
  const DatasetFile file = read_dataset_toml(dir.file("data.toml"));
  DataOptions o;
  VideoClips clips(file, file.datasets, o);
  const auto sources = clips.sources();
  ASSERT_EQ(sources.size(), 4u);
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string stem = fs::path(sources[i].path).stem().string();
    const std::string name = cat(stem, "_0000", sources[i].start, "-005_0036x0020_wan.safetensors");
    const auto f = SafetensorsFile::open(dir.file("cache/" + name));
    const TensorEntry* e = f.find("latents_2x2x4_bfloat16");
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->dtype, DType::bf16);
    EXPECT_EQ(e->shape, (Shape{16, 2, 2, 4}));
    EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"architecture", "wan"},
                                                                {"width", "36"},
                                                                {"height", "20"},
                                                                {"format_version", "1.0.1"},
                                                                {"frame_count", "5"}}));
    std::vector<float> got(256), want(256);
    read_as_f32(*e, got.data());
    vae_encode(w, clips.clip(int64_t(i)).x0.data(), 5, 16, 32, want.data());
    EXPECT_LT(rel_l2(got, want), 1e-2) << name;  // bf16
  }
  const auto before = fs::last_write_time(dir.file("cache/a_00000-005_0036x0020_wan.safetensors"));
  r = run_cli("cache --backend cpu --data " + dir.file("data.toml") + " " + kVaeArgs);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("cached 0 clips, 4 were cached already"), std::string::npos) << r.output;
  EXPECT_EQ(fs::last_write_time(dir.file("cache/a_00000-005_0036x0020_wan.safetensors")), before);

  // With text files beside them (musubi-tuner's text encoder writes those), the cache is training data.
  for (const char* name : {"a", "b"}) {
    const std::vector<uint16_t> text(3 * 4096, f32_to_bf16(0.5f));
    write_safetensors(dir.file(cat("cache/", name, "_wan_te.safetensors")),
                      {{"varlen_t5_bfloat16", DType::bf16, {3, 4096}, text.data()}},
                      {{"architecture", "wan"}, {"caption1", "x"}, {"format_version", "1.0.1"}});
  }
  std::ofstream(dir.file("cache.toml")) << "[[datasets]]\ncache_directory = \"cache\"\n";
  DataOptions co;
  co.source = dir.file("cache.toml");
  co.in_dim = 16, co.text_len = 8, co.text_dim = 4096;
  EXPECT_EQ(open_dataset(co)->epoch_size(), 4);
}

// F = 1 + 4k, H and W multiples of 8 are needed; a missing cache_directory is named.
TEST(VaePipeline, CacheRefusesWhatItCannotEncode) {
  TempDir dir;
  fs::create_directories(dir.file("videos"));
  encode_video(dir.file("videos/a.mp4"), smooth_clip(9, 16, 16, 3));
  std::ofstream(dir.file("videos/a.txt")) << "a";
  std::ofstream(dir.file("six.toml")) << "[[datasets]]\nvideo_directory = \"videos\"\ncache_directory = \"cache\"\n"
                                         "resolution = [16, 16]\ntarget_frames = [6]\n";
  auto r = run_cli("cache --backend cpu --data " + dir.file("six.toml") + " " + kVaeArgs);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("6 frames; the VAE takes 1 + 4k frames (e.g. 5 or 9)"), std::string::npos) << r.output;
  std::ofstream(dir.file("nodir.toml")) << "[[datasets]]\nvideo_directory = \"videos\"\nresolution = [16, 16]\n"
                                           "target_frames = [5]\n";
  r = run_cli("cache --backend cpu --data " + dir.file("nodir.toml") + " " + kVaeArgs);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("has no cache_directory; add cache_directory"), std::string::npos) << r.output;
  r = run_cli("cache --backend cpu --data " + dir.file("nodir.toml") + " " + kVaeArgs + " --out " + dir.file("out"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir.file("out/a_00000-005_0016x0016_wan.safetensors"))) << r.output;
}

// A latent model's sample, decoded: --frames/--height/--width are pixels.
TEST(VaePipeline, SampleDecodesLatentsIntoAVideo) {
  TempDir dir;
  latent_model(dir);
  const std::string common = "sample --model " + dir.file("") + " --prompt 'a test' --steps 2" + " " + kVaeArgs;
  auto r = run_cli(common + " --frames 5 --height 16 --width 32 --out " + dir.file("s.gif"));
  ASSERT_EQ(r.code, 0) << r.output;
  expect_video(dir.file("s.gif"), 5, 16, 32);
  r = run_cli(common + " --frames 6 --height 16 --width 32 --out " + dir.file("t.gif"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("6 frames; the VAE takes 1 + 4k"), std::string::npos) << r.output;
}

// `sample --image` on a TI2V model with Wan2.2's VAE (tiny widths, its shapes otherwise; the config told by the
// file): a video of the asked size; refused without --vae and on a T2V model.
TEST(VaePipeline, SampleTi2vFromAnImage) {
  TempDir dir;
  VaeConfig vc = VaeConfig::wan22();
  vc.dim = 8, vc.dec_dim = 12;
  const VaeWeights w = VaeWeights::random(vc, 3);
  std::vector<TensorRef> refs;
  for (const auto& [name, shape] : vae_param_shapes(vc)) refs.push_back({name, DType::f32, shape, w.get(name)});
  fs::create_directories(dir.file("model"));  // the model's folder holds its config alone
  write_safetensors(dir.file("vae.safetensors"), refs);
  ModelConfig c = latent_config();
  c.in_dim = c.out_dim = 48;
  c.model_type = "ti2v";
  std::ofstream(dir.file("model/config.json")) << config_to_json(c).dump();
  encode_video(dir.file("image.gif"), smooth_clip(1, 40, 56, 'a'));
  const std::string common = "sample --backend cpu --model " + dir.file("model") +
                             " --prompt 'a test' --steps 2 --frames 5 --height 32 --width 32 --image " +
                             dir.file("image.gif");
  auto r = run_cli(common + " --vae " + dir.file("vae.safetensors") + " --out " + dir.file("s.gif"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("image to video"), std::string::npos) << r.output;
  expect_video(dir.file("s.gif"), 5, 32, 32);
  r = run_cli(common + " --out " + dir.file("t.safetensors"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("--image needs --vae"), std::string::npos) << r.output;
  c.model_type = "t2v";
  std::ofstream(dir.file("model/config.json")) << config_to_json(c).dump();
  r = run_cli(common + " --vae " + dir.file("vae.safetensors") + " --out " + dir.file("u.gif"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("--image is for TI2V models"), std::string::npos) << r.output;
}

// Training on latents with --vae writes its samples as videos at the largest bucket's pixel size.
TEST(VaePipeline, TrainingSamplesAreDecoded) {
  TempDir dir;
  latent_model(dir);
  fs::copy(fs::path(MEGASLIDE_TEST_DATA) / "musubi" / "cache", dir.file("cache"));
  std::ofstream(dir.file("data.toml")) << "[[datasets]]\ncache_directory = \"cache\"\n";
  std::ofstream(dir.file("prompts.txt")) << "a prompt\n";
  const auto r = run_cli("train --model tiny --config " + dir.file("config.json") + " --data " + dir.file("data.toml") +
                         " --steps 1 --sample-every 1 --sample-steps 1 --sample-prompts " + dir.file("prompts.txt") +
                         " " + kVaeArgs + " --out " + dir.file("run"));
  ASSERT_EQ(r.code, 0) << r.output;
  expect_video(dir.file("run/samples/step-1-0.gif"), 9, 48, 64);  // the largest bucket: 3 x 6 x 8 latents
}

// A training run's host-memory check counts the VAE that decodes its samples: its weights, held from the start, and its
// pass at the samples' pixel size (the largest bucket: 3 x 6 x 8 latents, 9 x 48 x 64 pixels).
TEST(VaePipeline, TrainingSamplesCountTheVaeInTheMemoryCheck) {
  const ModelConfig c = latent_config();
  const StepShapes shapes(ModelDims::make(c, 2, 3, 6, 8, c.text_len));
  TrainOptions o;
  o.samples.every = 1;
  o.samples.prompt_list = {"a prompt"};
  const int64_t without = train_host_need(o, RunSetup{}, c, shapes).samples;
  o.samples.vae = kVaeData + "tiny_vae.pth";
  o.samples.vae_config = kVaeData + "tiny_config.json";
  const int64_t with = train_host_need(o, RunSetup{}, c, shapes).samples;
  const VaeWeights w = VaeWeights::load(o.samples.vae, o.samples.vae_config);
  EXPECT_GE(with - without, 4 * w.count()) << "the VAE's f32 weights";
  EXPECT_GE(with,
            4 * w.count() + 4 * ParamTable(c).total() + 4 * 3 * 9 * 48 * 64 + vae_decode_bytes(w.config(), 9, 48, 64))
      << "its weights, and its pass beside the model's f32 weights and the decoded pixels";
  EXPECT_EQ(VaeWeights::count_for(w.config()), w.count());
}

}  // namespace ms::test
