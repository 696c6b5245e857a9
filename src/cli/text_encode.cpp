// `megaslide text-encode`: prompts to Wan2.1's umT5 text embeddings (docs/text_encoder.md): for prompt K, `ids.K`
// (int64, the tokens up to and including EOS) and `context.K` [L_K, dim] (f32), as Wan's T5EncoderModel returns them.
#include <chrono>
#include <memory>

#include "backend/cpu/t5_encoder.h"
#include "cli/commands.h"
#include "core/check.h"
#include "core/log.h"
#include "core/memory_usage.h"
#include "core/units.h"
#include "io/safetensors.h"
#include "registry/frozen_models.h"
#include "t5/text_encoder.h"

namespace ms::cli {
namespace {

struct TextEncodeArgs {
  T5Paths paths;
  std::string prompt, prompts, out;
  BackendChoice backend = BackendChoice::automatic;
};

void run_text_encode(const TextEncodeArgs& a) {
  const BackendKind backend = resolve_gpu_backend(a.backend);
  const std::vector<std::string> prompts =
      a.prompts.empty() ? std::vector<std::string>{a.prompt} : read_prompt_lines(a.prompts);
  TextEncoder encoder(a.paths.t5, a.paths.tokenizer, a.paths.config);
  const T5Config& c = encoder.config();
  log_info("text encoder from ", a.paths.t5, ": ", format_fixed(double(t5_param_count(c)) / 1e9, 2), " B parameters, ",
           c.num_layers, " layers of width ", c.dim, "; tokenizer ", a.paths.tokenizer, " (",
           encoder.tokenizer().size(), " pieces); backend ", backend);
  encoder.set_forward(make_t5_forward(backend, encoder.weights(), a.backend == BackendChoice::automatic));
  std::vector<EncodedPrompt> out;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t k = 0; k < prompts.size(); ++k) {
    const auto t = std::chrono::steady_clock::now();
    out.push_back(encoder.encode(prompts[k]));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    const int64_t L = int64_t(out.back().ids.size());
    log_info("prompt ", k + 1, " of ", prompts.size(), ": ", L, " tokens in ", format_fixed(s, 2), " s (",
             format_fixed(s > 0 ? t5_encode_flops(c, L) / s / 1e9 : 0.0, 1), " GFLOP/s)");
  }
  std::vector<TensorRef> tensors;
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t L = int64_t(out[k].ids.size());
    tensors.push_back({cat("ids.", k), DType::i64, {L}, out[k].ids.data()});
    tensors.push_back({cat("context.", k), DType::f32, {L, c.dim}, out[k].context.data()});
  }
  write_safetensors(a.out, tensors);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log_info("wrote ", a.out, ": ", out.size(), " prompt", out.size() == 1 ? "" : "s", " in ", format_fixed(seconds, 2),
           " s, peak memory ", format_bytes(double(peak_resident_bytes())));
}

}  // namespace

void add_t5_options(CLI::App& cmd, T5Paths& paths, bool required, const std::string& use) {
  auto* t5 = cmd.add_option("--t5", paths.t5,
                            "the umT5 text encoder: Wan's models_t5_umt5-xxl-enc-bf16.pth, or a safetensors file under "
                            "Wan's or Hugging Face UMT5EncoderModel names (ComfyUI's umt5_xxl_*, bf16/fp16/fp8)" +
                                use);
  auto* tokenizer = cmd.add_option("--tokenizer", paths.tokenizer,
                                   "umT5's sentencepiece model (spiece.model of google/umt5-xxl, also in Wan's "
                                   "google/umt5-xxl/ folder)");
  cmd.add_option("--t5-config", paths.config,
                 "the text encoder's JSON config (vocab, dim, dim_attn, dim_ffn, num_heads, num_layers, num_buckets, "
                 "shared_pos, text_len); default umT5-XXL as Wan builds it");
  if (required) {
    t5->required();
    tokenizer->required();
  } else {
    t5->needs(tokenizer);
    tokenizer->needs(t5);
  }
}

void add_text_encode_command(CLI::App& app) {
  auto args = std::make_shared<TextEncodeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "text-encode",
      "Prompts -> Wan2.1's umT5-XXL text embeddings (ids.K, context.K [L_K, 4096]) in a safetensors file");
  add_t5_options(*cmd, args->paths, true, "");
  auto* one = cmd->add_option("--prompt", args->prompt, "one prompt (K = 0)");
  auto* many = cmd->add_option("--prompts", args->prompts,
                               "UTF-8 text file, one prompt per line (split on \\n only; an empty line is an empty "
                               "prompt)");
  one->excludes(many);
  cmd->add_option("--out", args->out, "safetensors file to write ids.K (int64) and context.K [L_K, dim] (f32) to")
      ->required();
  add_backend_option(*cmd, args->backend, "auto: cuda when a usable GPU is present, else cpu");
  cmd->callback([args, one, many] {
    if (one->count() + many->count() != 1) MS_FAIL("text-encode needs --prompt TEXT or --prompts FILE");
    run_text_encode(*args);
  });
}

}  // namespace ms::cli
