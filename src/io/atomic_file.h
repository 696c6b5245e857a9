// Crash-safe file writes: write to a temporary name, fsync, rename, fsync the directory.
#pragma once
#include <string>

namespace ms {

// Writes `content` to `path` atomically; throws ms::Error naming the path and the system error
// (a full disk, a read-only directory) and leaves any previous file at `path` untouched.
void write_file_atomic(const std::string& path, const std::string& content);

// fsyncs a directory so that renames inside it survive a crash.
void fsync_dir(const std::string& dir);

std::string read_file(const std::string& path);  // throws ms::Error when unreadable

}  // namespace ms
