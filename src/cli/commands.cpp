#include "cli/commands.h"

namespace tritium::cli {

std::vector<Registrar>& registry() {
  static std::vector<Registrar> r;
  return r;
}

std::map<const CLI::App*, std::function<int()>>& runners() {
  static std::map<const CLI::App*, std::function<int()>> r;
  return r;
}

int run_subcommand(const CLI::App* sub) {
  auto it = runners().find(sub);
  if (it == runners().end()) return 1;
  return it->second();
}

}  // namespace tritium::cli
