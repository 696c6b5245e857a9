// `megaslide sample`: text-to-video with a trained model (and TI2V's image to video with --image): Euler
// flow-matching sampling with Wan's timestep shift, written as a video (pixel-space models) or as latents
// (safetensors).
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/memory_usage.h"
#include "core/text.h"
#include "core/units.h"
#include "data/frames.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "model/loader.h"
#include "registry/frozen_models.h"
#include "registry/registry.h"
#include "runtime/streamed_forward.h"
#include "sample/clip_output.h"
#include "sample/generate.h"
#include "t5/text_encoder.h"
#include "vae/vae_model.h"

namespace fs = std::filesystem;

namespace ms::cli {
namespace {

struct SampleArgs {
  std::string model, config, prompt, context, out, vae, vae_config;
  std::string image;  // TI2V: the first frame's image ("": text to video)
  T5Paths t5;
  std::string negative_prompt = kWanNegativePrompt;
  double guidance = 0;  // 0: the default (5.0 with --t5, else 1.0; A14B's experts 4.0 and 3.0)
  double guidance_low =
      0;                // Wan2.2 A14B: the low-noise expert's (0: 3.0 with --t5 where --guidance-scale is not given)
  double boundary = 0;  // Wan2.2 A14B: 0: the folder's boundary_ratio, else Wan's T2V-A14B 0.875
  bool sampler_given = false;  // --steps or --shift given: A14B's defaults (40 steps, shift 12) do not apply
  VaeChunking vae_chunking;
  BackendChoice backend = BackendChoice::automatic;
  DataShape shape;  // extents 0: from the checkpoint's trainer.json; channels: the model's in_dim
  SamplerConfig sampler;
  uint64_t seed = 0;
  double fps = 8;
  int64_t host_memory = 0;  // --host-memory; 0: detected
};

// A run directory stands for its latest checkpoint.
std::string model_dir(const std::string& model) {
  std::error_code ec;
  if (fs::is_directory(model, ec) && !fs::exists(fs::path(model) / "config.json", ec) &&
      fs::exists(fs::path(model) / "latest" / "config.json", ec))
    return (fs::path(model) / "latest").string();
  return model;
}

// Extents not given on the command line come from the training run that wrote the checkpoint: its data's largest
// clip shape.
void fill_shape(const std::string& model, DataShape& s) {
  if (s.frames > 0 && s.height > 0 && s.width > 0) return;
  const fs::path trainer = fs::path(model) / "trainer.json";
  std::error_code ec;
  if (!fs::exists(trainer, ec))
    MS_FAIL("--frames, --height and --width are needed: '", model,
            "' is not a training checkpoint (no trainer.json to take the training extents from)");
  nlohmann::json j = nlohmann::json::parse(read_file(trainer.string()), nullptr, false);
  if (j.is_discarded() || !j.contains("options"))
    MS_FAIL(trainer.string(), " is unreadable; pass --frames, --height, --width");
  // The data's largest clip shape (runs of this version), else the run's one clip size (earlier runs).
  const auto& o = j["options"];
  const nlohmann::json largest = j.value("sample_shape", nlohmann::json::array());
  const bool known = largest.is_array() && largest.size() == 3 && largest[0].is_number_integer() && largest[0] > 0;
  const char* keys[3] = {"frames", "height", "width"};
  int64_t* extents[3] = {&s.frames, &s.height, &s.width};
  for (int i = 0; i < 3; ++i)
    if (*extents[i] <= 0) *extents[i] = known ? largest[size_t(i)].get<int64_t>() : o.value(keys[i], int64_t(0));
}

// With a VAE, --frames/--height/--width are pixels: the extents not given are the training data's (latents) in
// pixels, and the whole is checked against the VAE's strides and turned into the latent shape s.
void pixel_shape_to_latents(const std::string& model, const VaeConfig& v, const ModelConfig& c, DataShape& s) {
  check_vae_decodes(v, c.in_dim, "--vae");
  if (s.frames <= 0 || s.height <= 0 || s.width <= 0) {
    DataShape data;
    fill_shape(model, data);
    const int64_t stride = v.space_stride();
    if (s.frames <= 0) s.frames = v.video_frames(data.frames);
    if (s.height <= 0) s.height = data.height * stride;
    if (s.width <= 0) s.width = data.width * stride;
  }
  check_vae_video_shape(v, s.frames, s.height, s.width, "--frames/--height/--width");
  s = {c.in_dim, v.latent_frames(s.frames), s.height / v.space_stride(), s.width / v.space_stride()};
}

// context [text_len, text_dim] from a safetensors file: its `context` or `context.0` (text-encode's first prompt)
// [L, text_dim] (a leading batch dim of 1 accepted), zero-padded to text_len as Wan pads it.
std::vector<float> read_context(const std::string& path, const ModelConfig& c) {
  SafetensorsFile f = SafetensorsFile::open(path);
  const TensorEntry* e = f.find("context");
  if (!e) e = f.find("context.0");
  if (!e)
    MS_FAIL(path,
            ": no tensor 'context' or 'context.0'; --context needs a text encoder's output [L, text_dim] "
            "(megaslide text-encode writes one)");
  Shape s = e->shape;
  if (s.size() == 3 && s[0] == 1) s.erase(s.begin());
  if (s.size() != 2 || s[1] != c.text_dim || s[0] < 1 || s[0] > c.text_len)
    MS_FAIL(path, ": '", e->name, "' has shape ", shape_str(e->shape), "; this model needs [L, ", c.text_dim,
            "] with 1 <= L <= text_len = ", c.text_len, " (text_dim ", c.text_dim, " from its config)");
  std::vector<float> ctx(size_t(c.text_len * c.text_dim), 0.0f);
  read_as_f32(*e, ctx.data());
  for (float v : ctx)
    if (!std::isfinite(v)) MS_FAIL(path, ": '", e->name, "' holds a non-finite value (inf or NaN)");
  return ctx;
}

// --image for a TI2V model: the image scaled to cover the clip's frame, its centre cropped (as the data's clips are),
// encoded by the VAE as a one-frame clip: the first latent frame [z_dim, 1, h, w].
std::vector<float> image_latent(const SampleArgs& a, const VaeWeights& vae, BackendKind frozen,
                                const HostLimit& limit) {
  const VaeConfig& vc = vae.config();
  const int64_t H = a.shape.height * vc.space_stride(), W = a.shape.width * vc.space_stride();
  RgbVideo img;
  try {
    img = decode_video(a.image, 0, 1);
  } catch (const Error& e) {
    MS_FAIL("--image: ", e.what());
  }
  std::vector<float> pixels(size_t(3 * H * W));  // [3, 1, H, W] in [-1, 1]
  rgb_to_model(resize_crop(img, {H, W}).data(), 1, H, W, pixels.data());
  check_vae_fits(vc, true, 1, H, W, a.vae_chunking, limit, "encoding --image");
  std::vector<float> latent(size_t(vc.z_dim * a.shape.height * a.shape.width));
  const std::unique_ptr<VaeOps> ops = make_vae_ops(frozen, vae);
  vae_encode(*ops, pixels.data(), 1, H, W, latent.data(), a.vae_chunking);
  log_info("encoded ", a.image, " (", img.width, "x", img.height, ", scaled and cropped to ", W, "x", H,
           ") as the first latent frame");
  return latent;
}

// The model of one source, loaded and ready to run: on the CPU with f32 weights, or on `kind`'s device with bf16
// weights rounded where the f32 ones lie (no second copy), for time_rows timesteps a clip. It owns its weights and
// its device state.
ModelForward load_forward(const ModelSource& src, const SampleArgs& a, BackendKind kind, int64_t time_rows = 1) {
  const ModelConfig& c = src.config;
  struct Loaded {  // destroyed in reverse: the device model before its backend, both before the weights
    AlignedBuffer<float> params;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<StreamedForward> device;
    ModelForward cpu;
  };
  auto m = std::make_shared<Loaded>();
  const ParamTable table(c);
  m->params = AlignedBuffer<float>(size_t(table.total()));  // [P] f32
  load_params(src, table, a.seed, m->params.data());
  if (kind == BackendKind::cpu) {
    m->cpu = cpu_model_forward(c, m->params.data(), a.shape, c.text_len, time_rows);
    return [m](const float* xt, const float* t, const float* ctx, float* v) { m->cpu(xt, t, ctx, v); };
  }
  const uint16_t* bf16 = narrow_to_bf16_in_place(m->params.data(), int64_t(m->params.size()));
  m->backend = make_backend(kind, 0, nullptr);
  const ModelDims d = ModelDims::make(c, 1, a.shape.frames, a.shape.height, a.shape.width, c.text_len, time_rows);
  Backend* be = m->backend.get();
  m->device = std::make_unique<StreamedForward>(
      c, d, *be, [be, &c, d] { return make_stage_runner(*be, c, d); }, bf16);
  log_info(src.description, " samples on ", kind,
           m->device->resident() ? " with every block resident" : ", its blocks streamed two at a time");
  return [m](const float* xt, const float* t, const float* ctx, float* v) { (*m->device)(xt, t, ctx, v); };
}

void run_sample(SampleArgs a) {
  validate(a.sampler);
  check_vae_tile(a.vae_chunking, "--vae-tile");
  if (!(a.fps > 0)) MS_FAIL("--fps must be positive, got ", a.fps);
  const std::string model = model_dir(a.model);
  // Wan2.2 A14B: both experts, the high-noise one above the boundary (Wan's text2video.py, diffusers' WanPipeline).
  const bool experts = !expert_folders(model)[0].empty();
  ModelSource src = resolve_model(model, a.config, experts ? Expert::high : Expert::none);
  const ModelSource low = experts ? resolve_model(model, a.config, Expert::low) : ModelSource{};
  if (experts && config_to_json(low.config) != config_to_json(src.config))
    MS_FAIL("'", model, "': its two experts have different configs; they must be one model's two halves");
  if (!experts && a.boundary > 0) MS_FAIL("--boundary applies to a Wan2.2 A14B folder of two experts");
  if (a.boundary >= 1) MS_FAIL("--boundary ", a.boundary, " must be below 1");
  const double boundary = experts ? expert_boundary(a.boundary, src.boundary) : 0;
  if (experts && !a.sampler_given) a.sampler.steps = 40, a.sampler.shift = 12.0;  // Wan's T2V-A14B
  const ModelConfig& c = src.config;
  std::unique_ptr<VaeWeights> vae;
  if (!a.vae.empty() && c.in_dim == 3) log_warn("--vae is not used: the model works on pixels");
  if (!a.vae.empty() && c.in_dim != 3) {
    vae = std::make_unique<VaeWeights>(VaeWeights::load(a.vae, a.vae_config));
    pixel_shape_to_latents(model, vae->config(), c, a.shape);
  } else {
    fill_shape(model, a.shape);
  }
  a.shape.channels = c.in_dim;
  if (!a.image.empty() && experts) MS_FAIL("--image is for TI2V models; a Wan2.2 A14B folder samples text to video");
  if (!a.image.empty() && !vae)
    MS_FAIL("--image needs --vae: the VAE encodes the image into the clip's first latent frame");
  const int64_t time_rows = sample_time_rows(c, a.shape, !a.image.empty());
  const std::string out = clip_output_path(a.out, c.in_dim, vae != nullptr);  // checked before the slow part
  const bool t5_given = !a.t5.t5.empty();
  const double scale = a.guidance > 0 ? a.guidance : !t5_given ? 1.0 : experts ? 4.0 : 5.0;
  const double scale_low = a.guidance_low > 0 ? a.guidance_low : a.guidance > 0 || !t5_given ? scale : 3.0;
  if (!experts && a.guidance_low > 0) MS_FAIL("--guidance-scale-2 applies to a Wan2.2 A14B folder of two experts");
  const bool guided = scale != 1.0 || (experts && scale_low != 1.0);
  // The frozen models (the text encoder, the VAE) run on a usable GPU with --backend auto or cuda, and so does the
  // model where its kernels can run it (docs/cli.md).
  const BackendKind frozen = resolve_gpu_backend(a.backend);
  BackendKind kind = frozen;
  if (const std::string why = kind == BackendKind::cuda ? stage_runner_refuses(kind, c) : ""; !why.empty()) {
    if (a.backend == BackendChoice::cuda) MS_FAIL("--backend cuda: ", why, "; use --backend cpu");
    log_warn("the model samples on the CPU: ", why);
    kind = BackendKind::cpu;
  }
  const bool on_device = kind != BackendKind::cpu;
  const HostLimit limit = host_limit(a.host_memory);
  const int64_t need = sample_host_bytes(c, a.shape, guided, on_device), weights = 4 * ParamTable(c).total();
  require_host_memory(
      cat("sampling ", src.description), need,
      cat("f32 weights ", format_bytes(double(weights)),
          on_device ? ", the staging buffers and the clips at " : ", the model's workspace at ", a.shape.frames, "x",
          a.shape.height, "x", a.shape.width, " ", format_bytes(double(need - weights))),
      limit, "Sample fewer frames or a smaller size");
  if (vae) {  // decoded once the model's memory is returned
    const VaeConfig& vc = vae->config();
    check_vae_fits(vc, false, vc.video_frames(a.shape.frames), a.shape.height * vc.space_stride(),
                   a.shape.width * vc.space_stride(), a.vae_chunking, limit, "decoding the sample");
  }
  const std::vector<float> image = a.image.empty() ? std::vector<float>{} : image_latent(a, *vae, frozen, limit);
  std::unique_ptr<TextEncoder> t5;
  if (!a.t5.t5.empty()) {
    t5 = std::make_unique<TextEncoder>(a.t5.t5, a.t5.tokenizer, a.t5.config);
    t5->set_forward(make_t5_forward(frozen, t5->weights(), true));
  }
  if (guided && !a.context.empty() && !t5)
    MS_FAIL("--guidance-scale ", scale, " with --context needs --t5 and --tokenizer to encode the negative prompt");
  const auto t_text = std::chrono::steady_clock::now();
  const std::vector<float> ctx = a.context.empty() ? prompt_context(c, a.prompt, t5.get()) : read_context(a.context, c);
  const std::vector<float> negative = guided ? prompt_context(c, a.negative_prompt, t5.get()) : std::vector<float>{};
  if (t5)
    log_info("encoded the prompt", guided ? " and the negative prompt" : "", " with ", a.t5.t5, " in ",
             format_fixed(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_text).count(), 1), " s");
  t5.reset();  // its memory (on a GPU, its weights) goes back before the model's comes
  log_info("sampling ", a.shape.frames, "x", a.shape.height, "x", a.shape.width, " (",
           c.in_dim == 3 ? "pixels" : "latents", ") with ", experts ? model : src.description, ": ", a.sampler.steps,
           " Euler steps, shift ", a.sampler.shift, ", seed ", a.seed,
           !guided   ? std::string(", no guidance")
           : experts ? cat(", guidance scales ", scale, " (high noise) and ", scale_low, " (low noise)")
                     : cat(", guidance scale ", scale),
           experts ? cat("; the low-noise expert below t ", 1000 * boundary, " (boundary ", boundary, ")") : "",
           image.empty() ? "" : "; image to video, the first latent frame the image's at t = 0");
  auto last = std::chrono::steady_clock::now();
  const StepFn progress = [&](int64_t i, int64_t n, double t0, double t1) {
    const auto now = std::chrono::steady_clock::now();
    log_info("step ", i, "/", n, ": t ", t0, " -> ", t1, " (", std::chrono::duration<double>(now - last).count(),
             " s)");
    last = now;
  };
  const Guidance guidance{negative.empty() ? nullptr : negative.data(), scale, boundary, scale_low};
  std::vector<float> x;
  {
    auto expert = [&](const ModelSource& s, const char* which) {
      log_info("the ", which, "-noise expert takes over: ", s.description);
      return load_forward(s, a, kind);
    };
    const ModelForward forward =
        !experts ? load_forward(src, a, kind, time_rows)
                 : expert_forward([&] { return expert(src, "high"); }, [&] { return expert(low, "low"); }, boundary);
    x = generate_clip(c, forward, ctx.data(), c.text_len, a.shape, a.sampler, a.seed, progress, guidance,
                      image.empty() ? nullptr : image.data());
  }  // the VAE decodes with the model's memory returned
  const std::unique_ptr<VaeOps> vae_ops = vae ? make_vae_ops(frozen, *vae) : nullptr;
  if (vae_ops) log_info("decoding the sample with the VAE on ", frozen);
  write_clip(out, x.data(), a.shape, a.fps, vae_ops.get(), a.vae_chunking);
  log_info("wrote ", out);
}

}  // namespace

void add_sample_command(CLI::App& app) {
  auto a = std::make_shared<SampleArgs>();
  CLI::App* cmd = app.add_subcommand("sample", "Generate a video from a text prompt with a trained model");
  cmd->add_option("--model", a->model, "Checkpoint (RUN_DIR/latest, or a run directory), model directory or preset")
      ->required();
  cmd->add_option("--config", a->config, "config.json for a weights file");
  auto* prompt = cmd->add_option("--prompt", a->prompt,
                                 "Caption: embedded by the umT5 encoder with --t5, else by the built-in hash embedding "
                                 "(a stand-in for toy models: it cannot steer a real Wan checkpoint)");
  auto* context = cmd->add_option("--context", a->context,
                                  "safetensors with `context` or `context.0` [L, text_dim] (megaslide text-encode's "
                                  "output)");
  prompt->excludes(context);
  add_t5_options(*cmd, a->t5, false, ", for --prompt and --negative-prompt");
  cmd->add_option("--guidance-scale", a->guidance,
                  "Classifier-free guidance: v = v(negative) + scale (v(prompt) - v(negative)); default 5.0 (Wan's) "
                  "with --t5, else 1.0 (no guidance: one model call per step); a Wan2.2 A14B folder: the high-noise "
                  "expert's, 4.0 with --t5")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--guidance-scale-2", a->guidance_low,
                  "A Wan2.2 A14B folder: the low-noise expert's guidance scale (diffusers' guidance_scale_2; default "
                  "Wan's 3.0 with --t5, or --guidance-scale when given)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--boundary", a->boundary,
                  "A Wan2.2 A14B folder: the timestep fraction where sampling switches from the high-noise expert to "
                  "the low-noise one (default: the folder's boundary_ratio, else Wan's T2V-A14B 0.875)")
      ->check(CLI::Range(0.0, 1.0).description("in (0, 1)"));
  cmd->add_option("--negative-prompt", a->negative_prompt,
                  "The negative prompt of guidance (default: Wan's own, wan/configs/shared_config.py)");
  cmd->add_option("--frames", a->shape.frames,
                  "Frames (latent frames for latent models without --vae; default: the training data's largest clip "
                  "shape)");
  cmd->add_option("--height", a->shape.height, "Height (default: as --frames)");
  cmd->add_option("--width", a->shape.width, "Width (default: as --frames)");
  auto* steps = cmd->add_option("--steps", a->sampler.steps, "Euler steps (a Wan2.2 A14B folder: Wan's 40)")
                    ->capture_default_str();
  auto* shift = cmd->add_option("--shift", a->sampler.shift,
                                "Timestep shift: t = shift s / (1 + (shift - 1) s), s linear from 1 to 0 (a Wan2.2 "
                                "A14B folder: Wan's 12)")
                    ->capture_default_str();
  cmd->add_option("--seed", a->seed, "Noise seed (and initialisation seed for a model without weights)")
      ->capture_default_str();
  cmd->add_option("--fps", a->fps, "Frame rate of the written video")->capture_default_str();
  cmd->add_option("--out", a->out, "video.mp4 | .webm | .gif | .mkv | .avi, or .safetensors (latents)")->required();
  cmd->add_option("--vae", a->vae,
                  "Latent models: the VAE that decodes the sample into a video (Wan2.1_VAE.pth, safetensors or "
                  "diffusers' folder); --frames/--height/--width are then pixels (F = 1 + 4k, multiples of 8)");
  cmd->add_option("--vae-config", a->vae_config,
                  "The VAE's config JSON (default: Wan2.1's or Wan2.2's, as the file's shapes tell)");
  cmd->add_option("--image", a->image,
                  "TI2V models (wan2.2-ti2v-5b): image to video from this image (PNG, JPEG, ...), scaled to cover "
                  "the frame and centre-cropped, encoded by --vae as the clip's first frame; without it, text to "
                  "video");
  add_vae_tile_option(*cmd, a->vae_chunking);
  add_backend_option(
      *cmd, a->backend,
      "auto runs the model, the text encoder and the VAE on a usable GPU (the model on the CPU where the "
      "GPU kernels cannot run it), else on the CPU; cpu keeps them all on the CPU");
  add_host_memory_option(*cmd, a->host_memory);
  cmd->callback([a, prompt, context, steps, shift] {
    if (!prompt->count() && !context->count())
      MS_FAIL("give a caption with --prompt TEXT or a text embedding with --context FILE");
    a->sampler_given = steps->count() || shift->count();
    run_sample(*a);
  });
}

}  // namespace ms::cli
