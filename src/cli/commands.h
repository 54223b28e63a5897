// tritium CLI: subcommand registry. Each cmd_*.cpp registers itself with TRITIUM_REGISTER_COMMAND.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tritium::cli {

/// A registrar adds one subcommand (its options and a run callback) to the app.
using Registrar = std::function<void(CLI::App&)>;
std::vector<Registrar>& registry();
/// Map from subcommand pointer to the function that runs it; returns the process exit code.
std::map<const CLI::App*, std::function<int()>>& runners();
/// Runs the selected subcommand.
int run_subcommand(const CLI::App* sub);

struct AutoRegister {
  explicit AutoRegister(Registrar r) { registry().push_back(std::move(r)); }
};

}  // namespace tritium::cli

#define TRITIUM_CLI_CONCAT2(a, b) a##b
#define TRITIUM_CLI_CONCAT(a, b) TRITIUM_CLI_CONCAT2(a, b)
/// Registers a subcommand: TRITIUM_REGISTER_COMMAND([](CLI::App& app) { ... });
#define TRITIUM_REGISTER_COMMAND(fn) \
  static ::tritium::cli::AutoRegister TRITIUM_CLI_CONCAT(tritium_cli_reg_, __LINE__)(fn)
