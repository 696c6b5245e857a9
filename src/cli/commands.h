// The `megaslide` verbs. Each verb lives in its own file and registers a CLI11 subcommand whose
// callback does the work; errors are thrown as ms::Error and reported by main.
#pragma once
#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend.h"

namespace ms {
struct VaeChunking;
struct TrainOptions;
}  // namespace ms

namespace ms::cli {

void add_train_command(CLI::App& app);
void add_forward_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_op_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_sample_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_plot_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_vae_command(CLI::App& app);
void add_cache_command(CLI::App& app);
void add_text_encode_command(CLI::App& app);

// Registers the options of train's table (train/option_table.h) that `flags` names (empty: every one) on cmd, parsed
// into *opts; those opts already holds show its value as their default, with `notes[flag]` added to their help.
void add_train_options(CLI::App& cmd, const std::shared_ptr<TrainOptions>& opts,
                       const std::vector<std::string>& flags = {},
                       const std::map<std::string, std::string>& notes = {});

// `megaslide bench <what>` sub-verbs, registered by add_bench_command.
void add_bench_train(CLI::App& bench);
void add_bench_adamw(CLI::App& bench);
void add_bench_attention(CLI::App& bench);
void add_bench_data(CLI::App& bench);
void add_bench_vae(CLI::App& bench);
void add_bench_t5(CLI::App& bench);
void add_bench_stream(CLI::App& bench);
void add_bench_cuda(CLI::App& bench);

// `megaslide op <kernel>` sub-verbs, registered by add_op_command.
void add_op_adamw(CLI::App& op);

// Adds `--backend auto|cpu|cuda` to a compute verb; checked when the verb runs: resolve_backend for a verb that runs
// on the CPU only, resolve_gpu_backend for one with a GPU path (gpu_path: what runs where, for the help).
void add_backend_option(CLI::App& cmd, BackendChoice& backend, const std::string& gpu_path = "");
// Adds `--vae-tile H,W` (vae/vae_model.h's spatial tiles) to a verb that runs the VAE; checked when it runs.
void add_vae_tile_option(CLI::App& cmd, VaeChunking& chunking);

// Adds `--t5`, `--tokenizer` and `--t5-config` (the umT5 encoder, docs/text_encoder.md) to a verb: required, or
// optional with each of --t5 and --tokenizer needing the other. `use` says what the encoder is for, in --t5's help.
struct T5Paths {
  std::string t5, tokenizer, config;
};
void add_t5_options(CLI::App& cmd, T5Paths& paths, bool required, const std::string& use);

// Adds `--host-memory BYTES` (0 when absent: the detected limit, core/memory_usage.h) to a verb that allocates a model.
void add_host_memory_option(CLI::App& cmd, int64_t& bytes);

// The CPU for auto and cpu; cuda throws a clear error (no GPU, or this verb has no GPU path).
BackendKind resolve_backend(BackendChoice requested);
// A verb with a GPU path: cuda when asked, or for auto when a usable GPU is present (else the CPU); cuda without one
// throws a clear error.
BackendKind resolve_gpu_backend(BackendChoice requested);

}  // namespace ms::cli
