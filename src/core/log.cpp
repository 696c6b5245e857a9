#include "core/log.h"

#include <cstdio>
#include <mutex>

namespace ms {
namespace {
LogLevel g_level = LogLevel::info;
std::string g_name = "megaslide";
std::mutex g_mutex;
const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warn:
      return "warning";
    case LogLevel::error:
      return "error";
  }
  return "?";
}
}  // namespace

void set_log_level(LogLevel level) { g_level = level; }
LogLevel log_level() { return g_level; }
void set_log_name(const std::string& name) { g_name = name; }
const std::string& log_name() { return g_name; }

void log_line(LogLevel level, const std::string& msg) {
  if (level < g_level) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "%s: %s: %s\n", g_name.c_str(), level_name(level), msg.c_str());
}

}  // namespace ms
