// tritium core: the one exception type every layer throws, and checking helpers.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace tritium {

/// Error raised for every user-visible failure (bad files, bad input, unsupported models).
/// The message is one line that names the file, field or argument at fault.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// Throws tritium::Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tritium

/// Throws tritium::Error(fmt::format(...)) when cond is false.
#define TRITIUM_CHECK(cond, ...)                 \
  do {                                           \
    if (!(cond)) ::tritium::fail(__VA_ARGS__);   \
  } while (0)
