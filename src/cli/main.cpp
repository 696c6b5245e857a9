// megaslide: full fine-tuning of Wan-class video diffusion transformers on one GPU.
#include "cli/commands.h"
#include "cli/run_app.h"

int main(int argc, char** argv) {
  CLI::App app{"megaslide: full fine-tuning of Wan2.1-class video DiTs with host-resident state and layer streaming"};
  app.require_subcommand(1);
  ms::cli::add_train_command(app);
  ms::cli::add_forward_command(app);
  ms::cli::add_bench_command(app);
  ms::cli::add_op_command(app);
  ms::cli::add_plan_command(app);
  ms::cli::add_sample_command(app);
  ms::cli::add_eval_command(app);
  ms::cli::add_plot_command(app);
  ms::cli::add_convert_command(app);
  ms::cli::add_vae_command(app);
  ms::cli::add_cache_command(app);
  ms::cli::add_text_encode_command(app);
  return ms::cli::run_app(app, argc, argv);
}
