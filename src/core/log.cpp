#include "core/log.h"

#include <cstdio>
#include <mutex>

namespace ms {
namespace {
LogLevel g_level = LogLevel::info;
std::mutex g_mutex;
const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warning";
    case LogLevel::error: return "error";
  }
  return "?";
}
}  // namespace

void set_log_level(LogLevel level) { g_level = level; }

void log_line(LogLevel level, const std::string& msg) {
  if (level < g_level) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "megaslide: %s: %s\n", level_name(level), msg.c_str());
}

}  // namespace ms
