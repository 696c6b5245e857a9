// Runs the built `megaslide` binary for end-to-end tests.
#pragma once
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace ms::test {

struct CliResult {
  int code = -1;
  std::string output;  // stdout and stderr
};

// Runs `megaslide args` in the working directory `cwd` ("": this process's).
inline CliResult run_cli(const std::string& args, const std::string& cwd = "") {
  CliResult r;
  const std::string cmd =
      (cwd.empty() ? "" : "cd '" + cwd + "' && ") + std::string(MEGASLIDE_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace ms::test
