// Runs a parsed-on-demand CLI11 app as main does: -q / -v, ms::Error as a one-line "error:" and exit 1.
#pragma once
#include <CLI/CLI.hpp>

namespace ms::cli {

// Adds -q / -v to app, parses argv and runs the chosen verb; returns the process exit code.
int run_app(CLI::App& app, int argc, char** argv);

}  // namespace ms::cli
