// Shared helpers for the test suite: locating test data.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace tritium::test {

/// The repository's own small fixtures (always present).
inline std::string data_dir() { return TRITIUM_TESTS_DATA_DIR; }
/// The bundled default model.
inline std::string bundled_model() { return std::string(TRITIUM_SOURCE_DIR) + "/models/tiny-bitnet"; }
/// The larger shared test data (TRITIUM_TEST_DATA, default ../shared beside the checkout); "" when absent.
inline std::string shared_dir() {
  const char* e = std::getenv("TRITIUM_TEST_DATA");
  std::string d = e ? e : std::string(TRITIUM_SOURCE_DIR) + "/../shared";
  return std::filesystem::is_directory(d) ? d : "";
}
/// Whether the suite runs under AddressSanitizer (heavy tests use smaller workloads there).
inline bool under_sanitizer() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#else
  return false;
#endif
}

}  // namespace tritium::test

#define REQUIRE_SHARED_DATA(dir)                                                             \
  const std::string dir = ::tritium::test::shared_dir();                                     \
  if (dir.empty()) GTEST_SKIP() << "shared test data not found (set TRITIUM_TEST_DATA)"
