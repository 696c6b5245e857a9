// `megaslide train`: with no arguments, a small model on the built-in synthetic shapes, in minutes.
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/commands.h"
#include "core/log.h"
#include "core/parallel.h"
#include "data/dataset.h"
#include "dist/mpi.h"
#include "train/option_table.h"
#include "train/trainer.h"

namespace ms::cli {

void add_train_options(CLI::App& cmd, const std::shared_ptr<TrainOptions>& opts, const std::vector<std::string>& flags,
                       const std::map<std::string, std::string>& notes) {
  const TrainOptions defaults = *opts;
  for (const TrainOption& o : train_option_table()) {
    if (!flags.empty() && std::find(flags.begin(), flags.end(), o.flag) == flags.end()) continue;
    const auto note = notes.find(o.flag);
    const std::string help = o.help + (note == notes.end() ? "" : note->second);
    if (o.is_switch) {
      cmd.add_flag_callback(
          o.flag, [opts, &o] { o.parse(*opts, ""); }, help);
      continue;
    }
    CLI::Option* added = cmd.add_option_function<std::string>(
        o.flag + (o.alias.empty() ? "" : "," + o.alias), [opts, &o](const std::string& v) { o.parse(*opts, v); }, help);
    const nlohmann::json shown = o.save(defaults);
    added->type_name(o.value_name);
    if (o.show_default && !(shown.is_string() && shown.get<std::string>().empty()))
      added->default_str(shown.is_string() ? shown.get<std::string>() : shown.dump());
  }
}

void add_train_command(CLI::App& app) {
  auto opts = std::make_shared<TrainOptions>();
  auto hooks = std::make_shared<TrainHooks>();
  auto resume_dir = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a Wan2.1-style DiT with rectified flow (no arguments: tiny model, synthetic shapes, ~minutes)");
  add_train_options(*cmd, opts);
  cmd->add_option("--resume", *resume_dir, "Continue the run in this directory from its latest checkpoint");
  // Testing aids, hidden from --help and never saved with the run (train/options.h: TrainHooks).
  cmd->add_option("--inject-nan-grad", hooks->inject_nan_grad, "Testing aid: put a NaN in this step's gradients")
      ->group("");
  cmd->add_option("--inject-nan-activation", hooks->inject_nan_activation,
                  "Testing aid: put a NaN in the output of block num_layers/2 in this step's forward")
      ->group("");
  cmd->add_option("--inject-inf-data", hooks->inject_inf_data, "Testing aid: put an Inf in this data sample's video")
      ->group("");
  cmd->add_option("--inject-data-error", hooks->inject_data_error, "Testing aid: loading this data sample fails")
      ->group("");
  cmd->add_option("--inject-rank-exit", hooks->inject_rank_exit,
                  "Testing aid: the last rank of a distributed run exits as this step starts")
      ->group("");
  cmd->add_option("--inject-rank-hang", hooks->inject_rank_hang,
                  "Testing aid: the last rank of a distributed run stops answering as this step starts")
      ->group("");
  cmd->add_option("--inject-rank-exit-saving", hooks->inject_rank_exit_saving,
                  "Testing aid: the last rank of a distributed run exits while the checkpoint of this step is saved")
      ->group("");
  cmd->callback([opts, hooks, resume_dir, cmd] {
    if (!resume_dir->empty()) {  // the run's saved options hold; only its length and this machine's may change
      std::string given;
      for (const TrainOption& o : train_option_table())
        if (o.flag != "--steps" && o.saved && cmd->count(o.flag)) given += (given.empty() ? "" : ", ") + o.flag;
      if (!given.empty())
        MS_FAIL("--resume continues a run with the options saved in its trainer.json; only --steps and ",
                "--host-memory may be given, not ", given, ". Start a new run (--out) to change them");
    }
    if (!is_synthetic_shapes(opts->data)) {  // sizes not given come from the data (TrainOptions: 0)
      for (auto [flag, value] : {std::pair{"--frames", &opts->frames},
                                 {"--height", &opts->height},
                                 {"--width", &opts->width},
                                 {"--batch-size", &opts->batch_size}})
        if (!cmd->count(flag)) *value = 0;
    }
    // Under mpirun or srun, one rank of several (docs/distributed.md).
    const std::unique_ptr<Communicator> comm = connect_ranks(opts->collective_timeout);
    if (comm->size() > 1) {
      set_log_name(cat("megaslide[rank ", comm->rank(), "/", comm->size(), "]"));
      if (comm->rank() > 0 && log_level() == LogLevel::info) set_log_level(LogLevel::warn);  // rank 0 reports
      // Its share of the machine's cores, within the cores the launcher bound it to.
      const int share = std::max(1, int(std::thread::hardware_concurrency()) / comm->local_size());
      cpu_set_t bound;
      const int allowed = sched_getaffinity(0, sizeof bound, &bound) == 0 ? CPU_COUNT(&bound) : share;
      if (allowed < share && comm->rank() == 0)
        log_warn("mpirun bound each rank to ", allowed, " core(s) of the ", share,
                 " it could use; pass --bind-to none, or --map-by slot:PE=", share, ", to give it them");
      set_num_threads(std::min(share, allowed));
    }
    try {
      const TrainSummary s = resume_dir->empty() ? train(*opts, *hooks, comm.get())
                                                 : resume(*resume_dir, cmd->count("--steps") ? opts->steps : 0, *hooks,
                                                          opts->runtime.host_memory, comm.get());
      if (s.interrupted) throw CLI::RuntimeError(130);
    } catch (const std::exception& e) {
      if (comm->size() == 1 || dynamic_cast<const CLI::Error*>(&e)) throw;
      // The others would wait for this rank until their timeout: end them all now.
      const bool ours = dynamic_cast<const Error*>(&e);
      std::fprintf(stderr, "%s: %s: %s\n", log_name().c_str(), ours ? "error" : "internal error", e.what());
      std::fflush(stderr);
      comm->abort(ours ? 1 : 2);
    }
  });
}

}  // namespace ms::cli
