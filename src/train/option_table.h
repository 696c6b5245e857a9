// The options of `megaslide train`, each written once: its flag, help text, check, and its key in trainer.json (the
// flag without "--", '-' as '_'). The command line registers the table's flags, TrainOptions::validate runs its
// checks, and a checkpoint saves and reads its keys, so that a new option is one entry here and a field in
// TrainOptions.
#pragma once
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "train/options.h"

namespace ms {

struct TrainOption {
  std::string flag;          // --lr
  std::string alias;         // another flag for it ("" none)
  std::string help;          // for --help
  std::string value_name;    // for --help: INT, FLOAT, TEXT, BYTES or the choices {a,b}
  bool show_default = true;  // --help shows the default value
  bool is_switch = false;    // a flag without a value (--offload-activations): given means true
  bool required = false;     // in every trainer.json ever written: its absence means a damaged file
  bool saved = true;         // false: describes this machine, not the run (--host-memory): never in trainer.json,
                             // and may be given again with --resume
  std::string legacy_key;    // the key runs saved before a rename carry ("" none)
  std::function<void(TrainOptions&, const std::string&)> parse;  // the command line's text; throws naming the flag
  std::function<void(const TrainOptions&)> check;                // throws naming the flag and the value
  std::function<nlohmann::json(const TrainOptions&)> save;
  std::function<void(TrainOptions&, const nlohmann::json&, const std::string& where)> load;

  std::string key() const;  // in trainer.json
};

const std::vector<TrainOption>& train_option_table();

// trainer.json's "options": every saved key of the table.
nlohmann::json options_to_json(const TrainOptions& o);
// Reads what options_to_json wrote, and what earlier versions wrote: a key absent there keeps its default, a
// renamed one is read under its old name, keys of options that no longer exist (testing aids) are ignored. Throws
// ms::Error naming a missing required key or a value of the wrong type.
TrainOptions options_from_json(const nlohmann::json& j);

}  // namespace ms
