// `megaslide bench stream`: how well layer streaming hides the host link behind compute. The default
// job runs streamed on the CPU backend with an emulated link, overlapped and serialised, once with
// the link fast enough to be compute-bound and once slow enough to be transfer-bound. --layers sets the
// tiny model's depth: each step exposes a fixed chain at its boundary (see boundary_bytes), which a deeper
// model amortises over more streamed stages. Under mpirun (docs/distributed.md) each rank runs the job with the
// global batch sharded, and rank 0 prints each rank's link bytes and collective time against the step.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "cli/commands.h"
#include "core/log.h"
#include "dist/mpi.h"
#include "io/atomic_file.h"
#include "model/param_table.h"
#include "plan/plan.h"
#include "train/trainer.h"

namespace ms::cli {
namespace {

struct BenchStreamArgs {
  int64_t steps = 5;
  int64_t layers = 0;    // blocks of the tiny model (0: the preset's)
  double link_gbps = 0;  // 0: pick one compute-bound and one transfer-bound rate from the measured compute time
  bool json = false;
};

// Bytes on the link that no schedule with exact (deferred) updates can hide: the next forward needs the
// stem and block 0 updated, their updates need the global norm, the norm needs every gradient, and the
// last two to arrive are block 0's and the stem's. So each step ends with their fp32 gradients down and
// their bf16 weights up, one after the other, while compute waits.
double boundary_bytes(const ModelConfig& c) {
  const ParamTable t(c);
  const double first_two = double(t.stages()[0].numel + t.stages()[1].numel);
  return (4.0 + 2.0) * first_two;
}

// Median step seconds of a run of the default job (the first step, which warms up, is left out), on every rank of
// comm (rank 0 reads them from the run's metrics).
double step_seconds(TrainOptions o, Communicator& comm, const TrainHooks& hooks = {}) {
  const int64_t lead_pid = int64_t(comm.from_lead(Channel::control, double(::getpid())));
  o.out = (std::filesystem::temp_directory_path() / ("megaslide-bench-stream-" + std::to_string(lead_pid))).string();
  o.save_every = 0;
  const bool lead = comm.rank() == 0;
  if (lead) std::filesystem::remove_all(o.out);
  train(o, hooks, &comm);
  double median = 0;
  if (lead) {
    std::ifstream m(o.out + "/metrics.jsonl");
    std::vector<double> secs;
    for (std::string line; std::getline(m, line);) secs.push_back(nlohmann::json::parse(line)["seconds"].get<double>());
    secs.erase(secs.begin());
    std::sort(secs.begin(), secs.end());
    median = secs[secs.size() / 2];
  }
  median = comm.from_lead(Channel::control, median);
  if (lead) std::filesystem::remove_all(o.out);
  return median;
}

// Under mpirun: the default job at an unthrottled link on every rank, and per rank the bytes it moves over the link
// and between ranks per step, and the time its collectives take against the step's.
void bench_stream_ranks(const BenchStreamArgs& a, TrainOptions base, const ModelConfig& cfg, Communicator& comm) {
  const int R = comm.size();
  const Communicator::Traffic w0 = comm.traffic(Channel::weights), g0 = comm.traffic(Channel::grads);
  const double step = step_seconds(base, comm);
  const Communicator::Traffic w = comm.traffic(Channel::weights), g = comm.traffic(Channel::grads);
  const double steps = double(base.steps);
  ArenaOptions ao;
  ao.prefetch = base.runtime.prefetch;
  const Traffic link = step_traffic(ParamTable(cfg), DevicePlan{}, ao);  // one process's, shared by R ranks
  const double mine[] = {double(link.h2d()) / R,
                         double(link.d2h()) / R,
                         double(w.bytes - w0.bytes) / steps,
                         double(g.bytes - g0.bytes) / steps,
                         (w.seconds - w0.seconds) / steps,
                         (g.seconds - g0.seconds) / steps};
  const std::vector<double> all = comm.gather(Channel::control, mine);
  if (comm.rank() != 0) return;
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < R; ++r) {
    const double* v = all.data() + r * 6;
    ranks.push_back({{"rank", r},
                     {"h2d_bytes_per_step", v[0]},
                     {"d2h_bytes_per_step", v[1]},
                     {"all_gather_bytes_per_step", v[2]},
                     {"reduce_scatter_bytes_per_step", v[3]},
                     {"all_gather_seconds_per_step", v[4]},
                     {"reduce_scatter_seconds_per_step", v[5]}});
  }
  nlohmann::json r{
      {"model", base.model}, {"layers", cfg.num_layers}, {"ranks", R}, {"step_seconds", step}, {"per_rank", ranks}};
  if (a.json) {
    std::printf("%s\n", r.dump(2).c_str());
    return;
  }
  std::printf(
      "bench stream: default job (%lld blocks) streamed on the CPU backend by %d ranks (global batch %lld), "
      "median step %.3f s\n",
      static_cast<long long>(cfg.num_layers), R, static_cast<long long>(R * base.batch_size), step);
  std::printf("  %4s %10s %10s %14s %14s %14s %14s\n", "rank", "H2D MB", "D2H MB", "all-gather MB", "reduce-sc. MB",
              "all-gather s", "reduce-sc. s");
  for (const auto& x : ranks)
    std::printf("  %4d %10.2f %10.2f %14.2f %14.2f %14.4f %14.4f\n", x["rank"].get<int>(),
                x["h2d_bytes_per_step"].get<double>() / 1e6, x["d2h_bytes_per_step"].get<double>() / 1e6,
                x["all_gather_bytes_per_step"].get<double>() / 1e6,
                x["reduce_scatter_bytes_per_step"].get<double>() / 1e6, x["all_gather_seconds_per_step"].get<double>(),
                x["reduce_scatter_seconds_per_step"].get<double>());
  std::printf(
      "  per step: each rank's link bytes (its chunks of the weights up, of the gradients down), the bytes it sends\n"
      "  to the other ranks, and the time in its collectives (on the H2D and D2H streams, waiting for the slowest\n"
      "  rank included), against the step\n");
}

// Bytes over the link per step in each direction, as the plan counts them (step_traffic: bf16 weights up for
// every use but those still in their slot at the turn, fp32 gradients down once). The link, like PCIe,
// carries both directions at once.
Traffic link_bytes(const ModelConfig& c, int prefetch) {
  ArenaOptions ao;
  ao.prefetch = prefetch;  // bf16 weights on the link (the CPU backend widens them on arrival)
  return step_traffic(ParamTable(c), DevicePlan{}, ao);
}

void bench_stream(const BenchStreamArgs& a) {
  const std::unique_ptr<Communicator> comm = connect_ranks(1800);
  set_log_level(LogLevel::warn);
  TrainOptions base = baseline_job();
  base.steps = std::max<int64_t>(a.steps, 3);
  base.runtime.offload = Offload::stream;
  base.runtime.backend =
      BackendChoice::cpu;  // what it measures, with an emulated link (and under mpirun, MPI's collectives)
  ModelConfig cfg = preset_config(base.model);
  const std::string config_path =
      (std::filesystem::temp_directory_path() / ("megaslide-bench-stream-" + std::to_string(::getpid()) + ".json"))
          .string();
  if (a.layers > 0) {
    cfg.num_layers = a.layers;
    write_file_atomic(config_path, config_to_json(cfg).dump(2));
    base.config = config_path;
  }
  if (comm->size() > 1) {
    bench_stream_ranks(a, base, cfg, *comm);
    std::filesystem::remove(config_path);
    return;
  }
  const double compute = step_seconds(base, *comm);  // unthrottled link: memcpy, far faster than compute
  const Traffic bytes = link_bytes(cfg, base.runtime.prefetch);
  const double busiest = double(std::max(bytes.h2d(), bytes.d2h()));  // the direction that sets the transfer time
  std::vector<double> rates;
  if (a.link_gbps > 0)
    rates = {a.link_gbps};
  else  // the busier direction alone takes compute/2, then 2x compute
    rates = {busiest / (0.5 * compute) / 1e9, busiest / (2.0 * compute) / 1e9};
  nlohmann::json runs = nlohmann::json::array();
  for (double gbps : rates) {
    TrainOptions o = base;
    o.runtime.link_gbps = gbps;
    const double overlapped = step_seconds(o, *comm);
    const double transfer = step_seconds(o, *comm, {.skip_compute = true});  // the same schedule, compute ops empty
    const double serialised = step_seconds(o, *comm, {.serialize = true});
    const double boundary = boundary_bytes(cfg) / (gbps * 1e9);
    const bool compute_bound = compute >= transfer;
    runs.push_back(
        {{"link_gbps", gbps},
         {"compute_seconds", compute},
         {"transfer_seconds", transfer},
         {"overlapped_seconds", overlapped},
         {"serialised_seconds", serialised},
         {"boundary_seconds", boundary},
         {"bound", compute_bound ? "compute" : "transfer"},
         {"overlap_efficiency", std::max(compute, transfer) / overlapped},
         {"efficiency_ceiling", compute_bound ? nlohmann::json(compute / (compute + boundary)) : nlohmann::json()}});
  }
  set_log_level(LogLevel::info);
  std::filesystem::remove(config_path);
  nlohmann::json r{{"model", base.model},
                   {"layers", cfg.num_layers},
                   {"h2d_bytes_per_step", bytes.h2d()},
                   {"d2h_bytes_per_step", bytes.d2h()},
                   {"prefetch", base.runtime.prefetch},
                   {"runs", runs}};
  if (a.json) {
    std::printf("%s\n", r.dump(2).c_str());
    return;
  }
  std::printf(
      "bench stream: default job (%lld blocks) streamed on the CPU backend, K=%d, per step %.2f MB up, %.2f MB down\n",
      static_cast<long long>(cfg.num_layers), base.runtime.prefetch, double(bytes.h2d()) / 1e6,
      double(bytes.d2h()) / 1e6);
  std::printf("  %10s %8s %10s %10s %10s %11s %11s %10s %8s\n", "link GB/s", "bound", "compute s", "transfer s",
              "boundary s", "overlapped", "serialised", "efficiency", "ceiling");
  for (const auto& x : runs) {
    char ceiling[16] = "-";
    if (!x["efficiency_ceiling"].is_null())
      std::snprintf(ceiling, sizeof ceiling, "%.3f", x["efficiency_ceiling"].get<double>());
    std::printf("  %10.4f %8s %10.3f %10.3f %10.3f %11.3f %11.3f %10.3f %8s\n", x["link_gbps"].get<double>(),
                x["bound"].get<std::string>().c_str(), x["compute_seconds"].get<double>(),
                x["transfer_seconds"].get<double>(), x["boundary_seconds"].get<double>(),
                x["overlapped_seconds"].get<double>(), x["serialised_seconds"].get<double>(),
                x["overlap_efficiency"].get<double>(), ceiling);
  }
  std::printf(
      "  compute: the step with an unthrottled link; transfer: the step with every compute op empty;\n"
      "  efficiency = max(compute, transfer) / overlapped step time; boundary = the link time of the chain each\n"
      "  step must expose (block 0's and the stem's gradients down, then their weights up); ceiling, when\n"
      "  compute-bound: compute / (compute + boundary)\n");
}

}  // namespace

void add_bench_stream(CLI::App& bench) {
  auto a = std::make_shared<BenchStreamArgs>();
  CLI::App* cmd =
      bench.add_subcommand("stream", "Overlap of host-link transfers with compute in the streamed schedule");
  cmd->add_option("--steps", a->steps, "Steps per measurement (the median step is reported)")->capture_default_str();
  cmd->add_option("--layers", a->layers, "Blocks of the tiny model (default: the preset's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--link-gbps", a->link_gbps, "Emulated link GB/s (default: one compute-bound, one transfer-bound)");
  cmd->add_flag("--json", a->json, "Print one JSON object");
  cmd->callback([a] { bench_stream(*a); });
}

}  // namespace ms::cli
