#include "train/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

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

std::string save_checkpoint(const std::string& out, const ModelConfig& config, const ParamTable& table,
                            const HostState& host, const TrainerState& state, const nlohmann::json& options,
                            SaveFormat format) {
  const fs::path root(out), final_dir = root / step_name(state.step);
  const fs::path tmp = root / (step_name(state.step) + ".tmp-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (!fs::create_directories(tmp, ec) && ec)
    MS_FAIL("cannot create checkpoint directory '", tmp.string(), "': ", ec.message());
  try {
    std::vector<TensorRef> model, optim;
    const float* pools[] = {host.master.data(), host.exp_avg.data(), host.exp_avg_sq.data()};
    for (const auto& p : table.params())
      model.push_back({p.name, DType::bf16, p.shape, host.weights.data() + p.offset});
    for (int k = 0; k < 3; ++k)
      for (const auto& p : table.params())
        optim.push_back({std::string(kPools[k]) + "." + p.name, DType::f32, p.shape, pools[k] + p.offset});
    write_model_files(tmp.string(), SaveFormat::megaslide, config, model);
    if (format != SaveFormat::megaslide)
      write_model_files(tmp.string(), format, config, model, kShardBytes, (tmp / "model.safetensors").string());
    write_safetensors((tmp / "optimizer.safetensors").string(), optim);
    nlohmann::json t{{"step", state.step},
                     {"rng_state", std::to_string(state.rng_state)},
                     {"data_position", state.data_position},
                     {"clip_scale", state.clip_scale},
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
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    save_failed(root, state.step, cat(e.path1().string(), ": ", e.code().message()));
  } catch (const Error& e) {
    fs::remove_all(tmp, ec);
    save_failed(root, state.step, e.what());
  }
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
    info.options = t.at("options");
  } catch (const std::exception& e) {
    MS_FAIL((latest / "trainer.json").string(), " is unreadable (", escape_text(e.what()),
            "); the checkpoint is damaged");
  }
  info.config = load_config((latest / "config.json").string());
  return info;
}

void load_optimizer_state(const std::string& dir, const ParamTable& table, HostState& host) {
  const std::string path = (fs::path(dir) / "optimizer.safetensors").string();
  SafetensorsFile f = SafetensorsFile::open(path);
  float* pools[] = {host.master.data(), host.exp_avg.data(), host.exp_avg_sq.data()};
  WorkProgress progress("loading " + path, 3 * table.total(), sizeof(float));
  for (int k = 0; k < 3; ++k)
    for (const auto& p : table.params()) {
      const std::string name = std::string(kPools[k]) + "." + p.name;
      const TensorEntry* e = f.find(name);
      if (!e) MS_FAIL(path, ": '", name, "' is missing; the checkpoint does not match its config");
      if (e->shape != p.shape || e->dtype != DType::f32)
        MS_FAIL(path, ": '", name, "' is ", dtype_name(e->dtype), " ", shape_str(e->shape), ", expected F32 ",
                shape_str(p.shape));
      read_as_f32(*e, pools[k] + p.offset);
      progress.advance(p.numel);
    }
  host.refresh_weights();
}

}  // namespace ms
