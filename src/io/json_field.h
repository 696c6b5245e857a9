// Typed reads of optional JSON object fields with messages that name the file, the key and the bad value: the
// model's and the VAE's config files.
#pragma once
#include <array>
#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "core/log.h"
#include "core/text.h"

namespace ms {

namespace detail {
template <class T>
struct is_std_array : std::false_type {};
template <class U, size_t N>
struct is_std_array<std::array<U, N>> : std::true_type {};
template <class T>
struct is_std_vector : std::false_type {};
template <class U>
struct is_std_vector<std::vector<U>> : std::true_type {};
}  // namespace detail

// Whether v holds a T exactly: integers must be JSON integers within int64 (a float such as 9.6e20 would convert
// with undefined behaviour), std::arrays must have the right length, vectors any length.
template <class T>
bool json_representable(const nlohmann::json& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v.is_boolean();
  } else if constexpr (std::is_integral_v<T>) {
    return v.is_number_integer() &&
           (!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()));
  } else if constexpr (std::is_floating_point_v<T>) {
    return v.is_number();
  } else if constexpr (detail::is_std_array<T>::value || detail::is_std_vector<T>::value) {
    if (!v.is_array()) return false;
    if constexpr (detail::is_std_array<T>::value)
      if (v.size() != std::tuple_size_v<T>) return false;
    for (const auto& e : v)
      if (!json_representable<typename T::value_type>(e)) return false;
    return true;
  } else {
    return v.is_string();
  }
}

// j[key] as a T, or fallback when j has no such key; throws ms::Error "source: 'key' has the wrong type ...".
template <class T>
T json_field(const nlohmann::json& j, const char* key, const std::string& source, T fallback) {
  if (!j.contains(key)) return fallback;
  if (!json_representable<T>(j.at(key)))
    MS_FAIL(source, ": '", key, "' has the wrong type or size (", escape_text(j.at(key).dump()), ")");
  try {
    if constexpr (std::is_same_v<T, std::vector<bool>>) {  // no json::get into vector<bool>'s proxies
      T out;
      for (const auto& e : j.at(key)) out.push_back(e.get<bool>());
      return out;
    } else {
      return j.at(key).get<T>();
    }
  } catch (const nlohmann::json::exception&) {
    MS_FAIL(source, ": '", key, "' has the wrong type (", escape_text(j.at(key).dump()), ")");
  }
}

// The JSON document in the file at path; throws ms::Error "cannot open <what> 'path'; <hint>" or "path: not valid
// JSON (...)".
inline nlohmann::json read_json_file(const std::string& path, const std::string& what, const std::string& hint) {
  std::ifstream f(path);
  if (!f) MS_FAIL("cannot open ", what, " ", quote_text(path), "; ", hint);
  try {
    nlohmann::json j;
    f >> j;
    return j;
  } catch (const nlohmann::json::exception& e) {
    MS_FAIL(path, ": not valid JSON (", escape_text(e.what()), ")");
  }
}

// Warns "source: unknown <what> keys ignored: 'a', 'b'" for the keys of object j that are not in known.
inline void warn_unknown_keys(const nlohmann::json& j, const std::set<std::string>& known, const std::string& source,
                              const std::string& what) {
  std::string unknown;
  for (const auto& [k, v] : j.items())
    if (!known.count(k)) unknown += (unknown.empty() ? "" : ", ") + quote_text(k);
  if (!unknown.empty()) log_warn(source, ": unknown ", what, " keys ignored: ", unknown);
}

}  // namespace ms
