#include "core/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/check.h"
#include "core/text.h"

namespace ms {
namespace {

std::string lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// Bytes per unit, or 0 for an unknown unit.
double unit_scale(const std::string& unit) {
  static const struct {
    const char* name;
    double scale;
  } units[] = {{"", 1},
               {"b", 1},
               {"k", 1e3},
               {"kb", 1e3},
               {"m", 1e6},
               {"mb", 1e6},
               {"g", 1e9},
               {"gb", 1e9},
               {"t", 1e12},
               {"tb", 1e12},
               {"kib", 1024.0},
               {"mib", 1024.0 * 1024},
               {"gib", 1024.0 * 1024 * 1024},
               {"tib", 1024.0 * 1024 * 1024 * 1024}};
  for (const auto& u : units)
    if (unit == u.name) return u.scale;
  return 0;
}

}  // namespace

int64_t parse_bytes(const std::string& text, const std::string& what) {
  const char* forms = "write a number and an optional unit: 4096, 16MiB, 80GiB, 141GB, 1.5TB";
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string number = text.substr(0, i);
  std::string unit = lower(text.substr(i));
  if (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  char* end = nullptr;
  const double value = number.empty() ? NAN : std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(value))
    MS_FAIL(what, " ", quote_text(text), " is not a byte size; ", forms);
  const double scale = unit_scale(unit);
  if (scale == 0)
    MS_FAIL(what, " ", quote_text(text), " has an unknown unit ", quote_text(text.substr(i)),
            "; use B, KB, MB, GB, TB (powers of 1000) ", "or KiB, MiB, GiB, TiB (powers of 1024)");
  const double bytes = std::round(value * scale);
  if (bytes > 9.2e18) MS_FAIL(what, " ", quote_text(text), " is too large");
  return int64_t(bytes);
}

std::string format_bytes(double bytes) {
  static const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (std::fabs(bytes) >= 999.5 && u < 6) {
    bytes /= 1000;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  else
    std::snprintf(buf, sizeof buf,
                  std::fabs(bytes) < 9.995   ? "%.2f %s"
                  : std::fabs(bytes) < 99.95 ? "%.1f %s"
                                             : "%.0f %s",
                  bytes, units[u]);
  return buf;
}

std::string format_fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace ms
