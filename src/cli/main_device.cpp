// megaslide_device: the verbs a GPU machine runs from tools/device-check.sh (`bench cuda`), in a binary
// that needs none of the video and plotting libraries of the full megaslide.
#include "cli/commands.h"
#include "cli/run_app.h"

int main(int argc, char** argv) {
  CLI::App app{"megaslide_device: the GPU benchmarks of megaslide"};
  app.require_subcommand(1);
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks: ratios against ceilings measured in the same run");
  bench->require_subcommand(1);
  ms::cli::add_bench_cuda(*bench);
  return ms::cli::run_app(app, argc, argv);
}
