// Shared helpers for the test suite: locating test data.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/parallel.h"
#include "kv/block_allocator.h"

namespace tritium::test {

/// Random ternary weights int8 [n * k] with zero density z; the non-zeros are +1 / -1 with probability 1/2 each.
inline std::vector<int8_t> random_ternary(int64_t n, int64_t k, double z, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<int8_t> w(static_cast<size_t>(n * k));
  for (auto& v : w) v = u(rng) < z ? 0 : (rng() & 1 ? 1 : -1);
  return w;
}
/// The same from a fresh generator seeded with `seed`.
inline std::vector<int8_t> random_ternary(int64_t n, int64_t k, double z, uint32_t seed) {
  std::mt19937 rng(seed);
  return random_ternary(n, k, z, rng);
}

/// One CPU thread for the scope of the object (the tiny models' GEMMs gain nothing from threads on a shared machine);
/// the previous count comes back afterwards.
struct OneThread {
  int saved = num_threads();
  OneThread() { set_num_threads(1); }
  ~OneThread() { set_num_threads(saved); }
};

/// Logits float32 [T, vocab] of every position of `ids` (one prefill into a fresh KV cache).
inline std::vector<float> prompt_logits(Backend& be, const std::vector<int32_t>& ids) {
  const auto& c = be.model().config();
  KvCacheSpec spec{c.num_layers, c.num_kv_heads, c.head_dim, 16, static_cast<int64_t>(ids.size() + 15) / 16};
  KvCache cache(spec);
  BlockAllocator alloc(spec.num_blocks);
  BlockTable bt;
  EXPECT_TRUE(bt.reserve(alloc, static_cast<int64_t>(ids.size()), spec.block_size));
  BatchChunk ch{ids, 0, bt.blocks, true};
  std::vector<float> logits;
  be.forward(std::span<const BatchChunk>(&ch, 1), cache, logits);
  return logits;
}

/// Index of the largest of v[0, n) (the first on ties).
inline int argmax_of(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

/// Greedy continuation through one KV cache: the prompt's prefill, then one decode step per token.
inline std::vector<int32_t> greedy_ids(Backend& be, const std::vector<int32_t>& ids, int n) {
  const auto& c = be.model().config();
  const int64_t total = static_cast<int64_t>(ids.size()) + n;
  KvCacheSpec spec{c.num_layers, c.num_kv_heads, c.head_dim, 16, (total + 15) / 16};
  KvCache cache(spec);
  BlockAllocator alloc(spec.num_blocks);
  BlockTable bt;
  EXPECT_TRUE(bt.reserve(alloc, total, spec.block_size));
  const int V = be.model().vocab_size();
  std::vector<float> logits;
  BatchChunk first{ids, 0, bt.blocks, false};
  be.forward(std::span<const BatchChunk>(&first, 1), cache, logits);
  std::vector<int32_t> out{argmax_of(logits.data() + logits.size() - V, V)};
  while (static_cast<int>(out.size()) < n) {
    const int32_t tok = out.back();
    BatchChunk step{std::span<const int32_t>(&tok, 1), static_cast<int64_t>(ids.size() + out.size() - 1), bt.blocks,
                    false};
    be.forward(std::span<const BatchChunk>(&step, 1), cache, logits);
    out.push_back(argmax_of(logits.data() + logits.size() - V, V));
  }
  return out;
}

/// The CPU backend of `m`, which it keeps alive.
inline std::shared_ptr<Backend> cpu_backend(std::shared_ptr<const Transformer> m) {
  return std::make_shared<CpuBackend>(std::move(m));
}
/// The CUDA backend (default options) of `m` when `cuda`, else its CPU backend; either keeps `m` alive.
inline std::shared_ptr<Backend> backend_for(std::shared_ptr<const Transformer> m, bool cuda) {
  return cuda ? make_cuda_backend(std::move(m)) : cpu_backend(std::move(m));
}

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

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

extern char** environ;

namespace tritium::test {

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

/// Runs the tritium binary with arguments (no shell), capturing stdout and stderr; stdin reads `input`.
inline CliResult run_cli(const std::vector<std::string>& args, const std::string& input = "") {
  static int counter = 0;
  const std::string base = std::filesystem::temp_directory_path().string() + "/tritium_cli_" +
                           std::to_string(::getpid()) + "_" + std::to_string(counter++);
  const std::string out_path = base + ".out", err_path = base + ".err", in_path = base + ".in";
  std::ofstream(in_path, std::ios::binary) << input;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 0, in_path.c_str(), O_RDONLY, 0);
  std::vector<std::string> all = {TRITIUM_BINARY};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  CliResult r;
  if (posix_spawn(&pid, TRITIUM_BINARY, &fa, nullptr, argv.data(), environ) == 0) {
    int st = 0;
    waitpid(pid, &st, 0);
    r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  posix_spawn_file_actions_destroy(&fa);
  auto slurp = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  std::filesystem::remove(in_path);
  return r;
}

}  // namespace tritium::test
