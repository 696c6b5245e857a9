// Log lines on stderr: "megaslide: <level>: <message>".
#pragma once
#include <string>

#include "core/check.h"

namespace ms {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3 };
void set_log_level(LogLevel level);
LogLevel log_level();
// What each line starts with: "megaslide" (a rank of a distributed run: "megaslide[rank R/N]").
void set_log_name(const std::string& name);
const std::string& log_name();
void log_line(LogLevel level, const std::string& msg);

template <class... A>
void log_info(const A&... a) {
  log_line(LogLevel::info, cat(a...));
}
template <class... A>
void log_warn(const A&... a) {
  log_line(LogLevel::warn, cat(a...));
}
template <class... A>
void log_debug(const A&... a) {
  log_line(LogLevel::debug, cat(a...));
}

}  // namespace ms
