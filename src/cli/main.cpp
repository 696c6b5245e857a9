// megaslide: full fine-tuning of Wan-class video diffusion transformers on one GPU.
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/check.h"
#include "core/log.h"

int main(int argc, char** argv) {
  CLI::App app{"megaslide: full fine-tuning of Wan2.1-class video DiTs with host-resident state and layer streaming"};
  app.require_subcommand(1);
  bool quiet = false, verbose = false;
  app.add_flag("-q,--quiet", quiet, "Only warnings and errors on stderr");
  app.add_flag("-v,--verbose", verbose, "Debug log lines");
  app.parse_complete_callback([&] {
    if (quiet) ms::set_log_level(ms::LogLevel::warn);
    if (verbose) ms::set_log_level(ms::LogLevel::debug);
  });
  ms::cli::add_train_command(app);
  ms::cli::add_forward_command(app);
  ms::cli::add_bench_command(app);
  ms::cli::add_op_command(app);
  ms::cli::add_plan_command(app);
  ms::cli::add_sample_command(app);
  ms::cli::add_eval_command(app);
  ms::cli::add_plot_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const ms::Error& e) {
    std::fprintf(stderr, "megaslide: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "megaslide: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
