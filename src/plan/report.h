// A plan for people (a table) and for programs (one JSON object; keys documented in docs/analysis.md).
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "plan/plan.h"

namespace ms {

nlohmann::json plan_to_json(const Plan& p);
std::string plan_to_table(const Plan& p);

}  // namespace ms
