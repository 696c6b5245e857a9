// Runs the built `megaslide` binary for end-to-end tests.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace ms::test {

struct CliResult {
  int code = -1;
  std::string output;  // stdout and stderr
};

// Runs a shell command line, its output captured.
inline CliResult run_cli_command(const std::string& cmd) {
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs `megaslide args` in the working directory `cwd` ("": this process's).
inline CliResult run_cli(const std::string& args, const std::string& cwd = "") {
  return run_cli_command((cwd.empty() ? "" : "cd '" + cwd + "' && ") + std::string(MEGASLIDE_BINARY) + " " + args +
                         " 2>&1");
}

// Runs `megaslide args` with `input` on its standard input, through a pipe (input holds no single quote).
inline CliResult run_cli_with_input(const std::string& args, const std::string& input) {
  return run_cli_command("printf '%s' '" + input + "' | " + std::string(MEGASLIDE_BINARY) + " " + args + " 2>&1");
}

// Expects a run that failed with megaslide's error prefix and `phrase` in its output.
inline void expect_cli_error(const CliResult& r, const std::string& phrase) {
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("megaslide: error:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(phrase), std::string::npos) << "missing '" << phrase << "' in: " << r.output;
}

}  // namespace ms::test
