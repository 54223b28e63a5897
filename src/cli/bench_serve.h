// tritium CLI: `bench serve`, attached under `bench`.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace tritium::cli {

/// Adds the `serve` subcommand to `bench`; returns its runner and stores the subcommand in *out_sub.
std::function<int()> add_bench_serve(CLI::App* bench, CLI::App** out_sub);

}  // namespace tritium::cli
