// libFuzzer target: config.json parsing and validation on arbitrary text. Every input must either
// give a valid config (whose parameter table is then built) or throw ms::Error.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/log.h"
#include "model/config.h"
#include "model/param_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ms::set_log_level(ms::LogLevel::error);
  auto j = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(data), size), nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    ms::ModelConfig c = ms::config_from_json(j, "fuzz.json");
    if (c.dim * c.ffn_dim < (int64_t(1) << 20) && c.num_layers < 64) ms::ParamTable table(c);
  } catch (const ms::Error&) {
  }
  return 0;
}
