// tritium: the command-line entry point. Each subcommand lives in its own cmd_*.cpp file.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"

namespace {

// One line "error: ..." for a command-line mistake, naming what is wrong. CLI11 checks required options and
// subcommands before it reports arguments it did not recognise, so by itself it answered a mistyped subcommand
// with "A subcommand is required" and a mistyped option with "--prompt is required".
std::string command_line_error(const CLI::App* app, const CLI::Error& e) {
  std::string path = app->get_name();  // the selected subcommand chain, e.g. "tritium bench serve"
  const CLI::App* sub = app;
  while (!sub->get_subcommands().empty()) {
    sub = sub->get_subcommands().front();
    path += " " + sub->get_name();
  }
  const std::vector<std::string> extra = app->remaining(true);
  if (sub == app && !extra.empty() && extra.front().rfind("-", 0) != 0) {
    std::vector<std::string> names;
    for (const CLI::App* s : app->get_subcommands([](const CLI::App*) { return true; })) names.push_back(s->get_name());
    return fmt::format("error: unknown subcommand '{}' (subcommands: {}; see '{} --help')\n", extra.front(),
                       fmt::join(names, ", "), path);
  }
  if (!extra.empty())
    return fmt::format("error: unknown argument '{}' for '{}' (see '{} --help')\n", extra.front(), path, path);
  return fmt::format("error: {} (see '{} --help')\n", e.what(), path);
}

}  // namespace

int main(int argc, char** argv) {
  // Line-buffered stdout: results reach a pipe or file as soon as they are printed.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  CLI::App app{"tritium: inference engine for ternary (1.58-bit) and LLM.int8() language models", "tritium"};
  app.failure_message(command_line_error);
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
