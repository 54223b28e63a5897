// tritium: the command-line entry point. Each subcommand lives in its own cmd_*.cpp file.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  // Line-buffered stdout: results reach a pipe or file as soon as they are printed.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  CLI::App app{"tritium: inference engine for ternary (1.58-bit) and LLM.int8() language models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tritium 0.1.0");
  for (const auto& reg : tritium::cli::registry()) reg(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto* sub : app.get_subcommands()) {
      return tritium::cli::run_subcommand(sub);
    }
  } catch (const tritium::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
