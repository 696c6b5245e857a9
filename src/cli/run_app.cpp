#include "cli/run_app.h"

#include <cstdio>
#include <exception>

#include "core/check.h"
#include "core/log.h"

namespace ms::cli {

int run_app(CLI::App& app, int argc, char** argv) {
  bool quiet = false, verbose = false;
  app.add_flag("-q,--quiet", quiet, "Only warnings and errors on stderr");
  app.add_flag("-v,--verbose", verbose, "Debug log lines");
  app.parse_complete_callback([&] {
    if (quiet) set_log_level(LogLevel::warn);
    if (verbose) set_log_level(LogLevel::debug);
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", log_name().c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "megaslide: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}

}  // namespace ms::cli
