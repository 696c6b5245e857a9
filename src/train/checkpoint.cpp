#include "train/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>

#include "core/check.h"
#include "core/log.h"
#include "core/text.h"
#include "core/work_progress.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace fs = std::filesystem;

namespace ms {
namespace {

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

const char* kPools[] = {"master", "exp_avg", "exp_avg_sq"};

std::string shard_file(int rank, int ranks) {
  return "optimizer-rank" + std::to_string(rank) + "-of-" + std::to_string(ranks) + ".safetensors";
}

// The rank and rank count of a name shard_file wrote; false for any other name.
bool parse_shard_file(const std::string& name, int* rank, int* ranks) {
  int end = 0;
  return std::sscanf(name.c_str(), "optimizer-rank%d-of-%d.safetensors%n", rank, ranks, &end) == 2 &&
         size_t(end) == name.size() && name == shard_file(*rank, *ranks) && *ranks > 0;
}

// This rank's optimizer state: per parameter for one rank (optimizer.safetensors), else its shard of each stage.
void write_optimizer(const fs::path& dir, const CheckpointParts& p) {
  const HostState& host = p.host;
  const float* pools[] = {host.master.data(), host.exp_avg.data(), host.exp_avg_sq.data()};
  std::vector<TensorRef> optim;
  const int ranks = p.shards.ranks();
  for (int k = 0; k < 3; ++k) {
    if (ranks == 1) {
      for (const auto& q : p.table.params())
        optim.push_back({std::string(kPools[k]) + "." + q.name, DType::f32, q.shape, pools[k] + q.offset});
      continue;
    }
    for (size_t s = 0; s < p.table.stages().size(); ++s) {
      const StageShard& sh = p.shards.stage(s);
      optim.push_back(
          {std::string(kPools[k]) + "." + p.table.stages()[s].name, DType::f32, {sh.count}, pools[k] + sh.offset});
    }
  }
  write_safetensors((dir / (ranks == 1 ? "optimizer.safetensors" : shard_file(p.shards.rank(), ranks))).string(), optim,
                    {{"ranks", std::to_string(ranks)}});
}

// Runs fn; returns what it threw ("": nothing).
std::string attempt(const std::function<void()>& fn) {
  try {
    fn();
    return "";
  } catch (const fs::filesystem_error& e) {
    return cat(e.path1().string(), ": ", e.code().message());
  } catch (const Error& e) {
    return e.what();
  }
}

// Several ranks: rank 0 writes dir's model files from every rank's working weights, gathered a round at a time (a
// collective that every rank sees to its end, even after rank 0 failed). Returns rank 0's error ("": none).
std::string write_gathered_model(const fs::path& dir, const CheckpointParts& p, SaveFormat format, Communicator& comm) {
  const bool lead = comm.rank() == 0;
  std::vector<TensorRef> model;  // the table's order, so element e of the pool is at byte 2e of the data
  for (const auto& q : p.table.params()) model.push_back({q.name, DType::bf16, q.shape, nullptr});
  std::unique_ptr<SafetensorsWriter> w;
  std::string error = lead ? attempt([&] { w = model_file_writer(dir.string(), model); }) : "";
  gather_to_lead(
      comm, p.table, p.shards, p.host.weights.data(), [&](size_t s, int64_t begin, const uint16_t* values, int64_t n) {
        if (error.empty())
          error = attempt([&] { w->write_at((p.table.stages()[s].offset + begin) * 2, values, size_t(n) * 2); });
      });
  if (lead && error.empty())
    error = attempt([&] {
      w->commit();
      finish_model_files(dir.string(), format, p.config);
    });
  return error;
}

// Whether every rank got through `what` without an error (the first one's message in *why); a collective.
bool all_ranks_ok(Communicator& comm, const std::string& error, std::string* why) {
  const double failed = error.empty() ? 0 : 1;
  const std::vector<double> all = comm.gather(Channel::control, std::span<const double>(&failed, 1));
  std::string ranks;
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != 0) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  if (ranks.empty()) return true;
  *why = error.empty() ? cat("rank ", ranks, " could not write its part") : error;
  return false;
}

// A save that did not complete: names the step, the cause and the checkpoint that is still good.
[[noreturn]] void save_failed(const fs::path& root, int64_t step, const std::string& why) {
  std::error_code ec;
  const fs::path previous = fs::read_symlink(root / "latest", ec);
  if (ec)
    MS_FAIL("checkpoint of step ", step, " not saved: ", why, ". The run has no earlier checkpoint; fix the cause ",
            "(free disk space, a file-size limit, permissions) and start it again");
  MS_FAIL("checkpoint of step ", step, " not saved: ", why, ". The previous checkpoint ", (root / previous).string(),
          " (", (root / "latest").string(), ") is intact; fix the cause (free disk space, a file-size limit, ",
          "permissions) and continue with --resume ", root.string());
}

// NAME.tmp-PID or NAME.old-PID: what a save leaves only while it runs.
bool is_temporary(const std::string& name) {
  for (const char* mark : {".tmp-", ".old-"}) {
    const size_t at = name.rfind(mark);
    if (at != std::string::npos && at + 5 < name.size() &&
        name.find_first_not_of("0123456789", at + 5) == std::string::npos)
      return true;
  }
  return false;
}

// Rank 0 of a save whose parts are all written: trainer.json, then the directory renamed into place and `latest`
// repointed. Returns what went wrong ("": nothing), the temporary directory removed then.
std::string publish(const fs::path& root, const fs::path& tmp, const fs::path& final_dir, const TrainerState& state,
                    const nlohmann::json& options) {
  std::error_code ec;
  try {
    nlohmann::json t{{"step", state.step},
                     {"rng_state", std::to_string(state.rng_state)},
                     {"data_position", state.data_position},
                     {"clip_scale", state.clip_scale},
                     {"ranks", state.ranks},
                     {"sample_shape", state.sample_shape},
                     {"options", options}};
    write_file_atomic((tmp / "trainer.json").string(), t.dump(2) + "\n");
    // A checkpoint of the same step (a re-save) is moved aside first, never deleted before the new one is in place.
    const fs::path aside = root / (step_name(state.step) + ".old-" + std::to_string(::getpid()));
    if (fs::exists(final_dir)) fs::rename(final_dir, aside);
    fs::rename(tmp, final_dir);
    fsync_dir(root.string());
    // repoint `latest` atomically: a new symlink renamed over the old one
    const fs::path link_tmp = root / ("latest.tmp-" + std::to_string(::getpid()));
    fs::remove(link_tmp, ec);
    fs::create_directory_symlink(step_name(state.step), link_tmp);
    fs::rename(link_tmp, root / "latest");
    fsync_dir(root.string());
    fs::remove_all(aside, ec);
    return "";
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    return cat(e.path1().string(), ": ", e.code().message());
  } catch (const Error& e) {
    fs::remove_all(tmp, ec);
    return e.what();
  }
}

}  // namespace

void remove_stale_temporaries(const std::string& out) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    if (!is_temporary(name)) continue;
    log_info("removing '", e.path().string(), "', left by a run that stopped while writing it");
    fs::remove_all(e.path(), ec);
  }
}

std::string save_checkpoint(const std::string& out, const CheckpointParts& parts, const TrainerState& state,
                            const nlohmann::json& options, SaveFormat format, Communicator& comm,
                            const std::function<void()>& midway) {
  const bool lead = comm.rank() == 0;
  // The temporary directory is named after rank 0's process.
  const int64_t lead_pid = int64_t(comm.from_lead(Channel::control, double(::getpid())));
  const fs::path root(out), final_dir = root / step_name(state.step);
  const fs::path tmp = root / (step_name(state.step) + ".tmp-" + std::to_string(lead_pid));
  std::error_code ec;
  std::string error, why;
  if (lead) {
    fs::remove_all(tmp, ec);
    if (!fs::create_directories(tmp, ec) && ec)
      error = cat("cannot create checkpoint directory '", tmp.string(), "': ", ec.message());
  }
  if (!all_ranks_ok(comm, error, &why)) MS_FAIL(why);
  // Each rank's part, then whether every part is there.
  if (comm.size() > 1) {
    error = write_gathered_model(tmp, parts, format, comm);
  } else {
    error = attempt([&] {
      std::vector<TensorRef> model;
      for (const auto& p : parts.table.params())
        model.push_back({p.name, DType::bf16, p.shape, parts.host.weights.data() + p.offset});
      write_model_files(tmp.string(), SaveFormat::megaslide, parts.config, model);
      if (format != SaveFormat::megaslide)
        write_model_files(tmp.string(), format, parts.config, model, kShardBytes, (tmp / "model.safetensors").string());
    });
  }
  if (midway) midway();
  if (error.empty()) error = attempt([&] { write_optimizer(tmp, parts); });
  if (!all_ranks_ok(comm, error, &why)) {
    if (lead) fs::remove_all(tmp, ec);
    save_failed(root, state.step, why);
  }
  // Published, or not: every rank returns with `latest` naming the new checkpoint, or throws.
  if (!all_ranks_ok(comm, lead ? publish(root, tmp, final_dir, state, options) : "", &why))
    save_failed(root, state.step, why);
  return final_dir.string();
}

int64_t prune_checkpoints(const std::string& out, int64_t keep) {
  MS_CHECK(keep >= 1, "prune_checkpoints keeps at least one checkpoint");
  const fs::path root(out);
  std::error_code ec;
  const std::string latest = fs::read_symlink(root / "latest", ec).filename().string();
  std::vector<std::string> steps;  // step-NNNNNNNN directories, oldest first (the names sort by step)
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory() && name.size() == 13 && name.starts_with("step-") &&
        name.find_first_not_of("0123456789", 5) == std::string::npos)
      steps.push_back(name);
  }
  std::sort(steps.begin(), steps.end());
  int64_t removed = 0;
  for (size_t i = 0; i + size_t(keep) < steps.size(); ++i) {
    if (steps[i] == latest) continue;
    fs::remove_all(root / steps[i], ec);
    if (ec)
      MS_FAIL("cannot remove the old checkpoint '", (root / steps[i]).string(), "' (--keep-last): ", ec.message());
    ++removed;
  }
  return removed;
}

CheckpointInfo read_checkpoint_info(const std::string& out) {
  const fs::path latest = fs::path(out) / "latest";
  std::error_code ec;
  if (!fs::exists(latest / "trainer.json", ec))
    MS_FAIL("cannot resume from '", out, "': it has no complete checkpoint (", latest.string(),
            "/trainer.json is missing); start a new run or point --resume at a run directory");
  CheckpointInfo info;
  info.dir = (fs::path(out) / fs::read_symlink(latest, ec)).string();
  if (ec) info.dir = latest.string();
  nlohmann::json t;
  try {
    t = nlohmann::json::parse(read_file((latest / "trainer.json").string()));
    info.state.step = t.at("step").get<int64_t>();
    info.state.rng_state = std::stoull(t.at("rng_state").get<std::string>());
    info.state.data_position = t.at("data_position").get<int64_t>();
    info.state.clip_scale = t.at("clip_scale").get<float>();
    info.state.ranks = t.value("ranks", 1);
    info.options = t.at("options");
  } catch (const std::exception& e) {
    MS_FAIL((latest / "trainer.json").string(), " is unreadable (", escape_text(e.what()),
            "); the checkpoint is damaged");
  }
  info.config = load_config((latest / "config.json").string());
  return info;
}

void load_optimizer_state(const std::string& dir, const ParamTable& table, const Shards& shards, HostState& host) {
  float* pools[] = {host.master.data(), host.exp_avg.data(), host.exp_avg_sq.data()};
  const fs::path single = fs::path(dir) / "optimizer.safetensors";
  // Whichever layout the state was saved in, a tensor's elements [from, from + n) go to this rank's pools at `to`.
  auto checked = [](const std::string& path, const TensorEntry* e, const std::string& name, const Shape& shape) {
    if (!e) MS_FAIL(path, ": '", name, "' is missing; the checkpoint does not match its config");
    if (e->shape != shape || e->dtype != DType::f32)
      MS_FAIL(path, ": '", name, "' is ", dtype_name(e->dtype), " ", shape_str(e->shape), ", expected F32 ",
              shape_str(shape));
    return e;
  };
  if (fs::exists(single)) {  // saved by one rank: per parameter
    SafetensorsFile f = SafetensorsFile::open(single.string());
    WorkProgress progress("loading " + single.string(), 3 * shards.total(), sizeof(float));
    std::vector<float> whole;
    for (int k = 0; k < 3; ++k)
      for (const auto& p : table.params()) {
        const std::string name = std::string(kPools[k]) + "." + p.name;
        const TensorEntry* e = checked(single.string(), f.find(name), name, p.shape);
        const StageShard& sh = shards.stage(size_t(p.stage));
        const int64_t stage_at = p.offset - table.stages()[size_t(p.stage)].offset;  // the parameter in its stage
        const int64_t lo = std::max(stage_at, sh.begin), hi = std::min(stage_at + p.numel, sh.begin + sh.count);
        if (lo >= hi) continue;
        if (hi - lo == p.numel) {
          read_as_f32(*e, pools[k] + sh.offset + (lo - sh.begin));
        } else {
          whole.resize(size_t(p.numel));
          read_as_f32(*e, whole.data());
          std::copy(whole.begin() + (lo - stage_at), whole.begin() + (hi - stage_at),
                    pools[k] + sh.offset + (lo - sh.begin));
        }
        progress.advance(hi - lo);
      }
    host.refresh_weights();
    return;
  }
  // Saved by M ranks: rank j's shard of stage s holds the stage's elements [j c, j c + its count), c = ceil(n / M).
  std::vector<int> saved_by;
  std::error_code ec;
  int M = 0;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    int rank = 0, ranks = 0;
    if (!parse_shard_file(name, &rank, &ranks)) continue;
    if (M == 0) M = ranks;
    if (ranks != M) MS_FAIL(dir, " holds optimizer shards of different runs (", name, "); it is damaged");
    saved_by.push_back(rank);
  }
  std::sort(saved_by.begin(), saved_by.end());
  for (int j = 0; j < M; ++j)
    if (j >= int(saved_by.size()) || saved_by[size_t(j)] != j)
      MS_FAIL(dir, " lacks ", shard_file(j, M), " (a checkpoint of ", M, " ranks needs every one); it is incomplete");
  if (M == 0)
    MS_FAIL(dir, " has no optimizer state (optimizer.safetensors, or optimizer-rankR-of-N.safetensors from a ",
            "distributed run); it is not a complete checkpoint");
  WorkProgress progress("loading the optimizer state of " + std::to_string(M) + " ranks from " + dir,
                        3 * shards.total(), sizeof(float));
  for (int j = 0; j < M; ++j) {
    const Shards theirs(table, j, M);
    const std::string path = (fs::path(dir) / shard_file(j, M)).string();
    SafetensorsFile f = SafetensorsFile::open(path);
    for (int k = 0; k < 3; ++k)
      for (size_t s = 0; s < table.stages().size(); ++s) {
        const StageShard &mine = shards.stage(s), &saved = theirs.stage(s);
        const std::string name = std::string(kPools[k]) + "." + table.stages()[s].name;
        const TensorEntry* e = checked(path, f.find(name), name, {saved.count});
        const int64_t lo = std::max(mine.begin, saved.begin);
        const int64_t hi = std::min(mine.begin + mine.count, saved.begin + saved.count);
        if (lo >= hi) continue;
        std::memcpy(pools[k] + mine.offset + (lo - mine.begin), e->data + (lo - saved.begin) * 4, size_t(hi - lo) * 4);
        progress.advance(hi - lo);
      }
  }
  host.refresh_weights();
}

}  // namespace ms
