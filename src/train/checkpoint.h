// Training checkpoints (docs/formats.md): OUT/step-NNNNNNNN/ holds model.safetensors (bf16 working weights,
// Wan key names), optimizer.safetensors (master, exp_avg, exp_avg_sq per parameter, f32) or, from a distributed run,
// one optimizer-rankR-of-N.safetensors per rank (its shard of each stage, docs/distributed.md), config.json
// (so the directory is a model directory) and trainer.json; OUT/latest points at the newest. Each is
// written into a temporary directory, fsynced and renamed, so a crash never leaves a broken latest; a distributed
// save counts only once every rank has written its part.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "model/config.h"
#include "model/export.h"
#include "model/param_table.h"
#include "runtime/communicator.h"
#include "runtime/host_state.h"
#include "runtime/shards.h"

namespace ms {

struct TrainerState {
  int64_t step = 0;           // optimizer steps taken
  uint64_t rng_state = 0;     // ms::Rng state after the last step
  int64_t data_position = 0;  // next sample index
  float clip_scale = 1.0f;    // immediate schedule: the clipping factor from the last step's norm
  int ranks = 1;              // the ranks of the run that saved it (its optimizer shards; docs/distributed.md)
  // F, H, W of the data's largest clip shape (bucket): what `megaslide sample` draws by default. Written for it; a
  // resumed run takes it from its data again.
  std::array<int64_t, 3> sample_shape{};
};

// What a checkpoint holds of a run: its model and this rank's state (host: its shards' pools, all of it for one rank).
struct CheckpointParts {
  const ModelConfig& config;
  const ParamTable& table;
  const Shards& shards;
  const HostState& host;
};

// Writes OUT/step-<step>/ and repoints OUT/latest; `format` wan or diffusers adds those tools' files beside
// model.safetensors (model/export.h). Called by every rank of comm: rank 0 writes the model (the ranks' working
// weights gathered a round at a time, runtime/shards.h: gather_to_lead) and trainer.json, and publishes the
// checkpoint once every rank's optimizer shard is written. Returns the checkpoint directory.
// midway: a testing aid, called on every rank once the model file is written and before the optimizer state is.
std::string save_checkpoint(const std::string& out, const CheckpointParts& parts, const TrainerState& state,
                            const nlohmann::json& options, SaveFormat format, Communicator& comm,
                            const std::function<void()>& midway = {});

// Removes all but the `keep` newest step-N/ checkpoints of the run in `out` (never the one `latest` names); returns
// how many it removed. Throws ms::Error naming a directory it cannot remove.
int64_t prune_checkpoints(const std::string& out, int64_t keep);

struct CheckpointInfo {
  std::string dir;  // the step directory
  TrainerState state;
  ModelConfig config;
  nlohmann::json options;
};

// Removes the temporaries (NAME.tmp-PID, NAME.old-PID) that a run killed while saving left in OUT. A
// step directory moved aside (.old) is never the one `latest` names: only steps after it are re-saved.
// One process per run directory.
void remove_stale_temporaries(const std::string& out);

// Reads OUT/latest/trainer.json and config.json. Throws ms::Error when OUT has no complete checkpoint.
CheckpointInfo read_checkpoint_info(const std::string& out);

// Fills master, moments and working weights of this rank's shards from dir's optimizer state, saved by any number of
// ranks (re-sharded when it differs from shards.ranks()).
void load_optimizer_state(const std::string& dir, const ParamTable& table, const Shards& shards, HostState& host);

}  // namespace ms
