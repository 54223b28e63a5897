// Tokenizer throughput: load, encode and decode of the WikiText-2 test text with the tiny (0),
// Llama 3 (1) and Qwen3 (2) tokenizers. Needs TRITIUM_TEST_DATA (default <src>/../shared).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "tokenizer/tokenizer.h"

namespace {

std::string data_root() {
  const char* r = std::getenv("TRITIUM_TEST_DATA");
  return r ? r : std::string(TRITIUM_SOURCE_DIR) + "/../shared";
}

const std::string& text() {
  static const std::string t = [] {
    std::ifstream f(data_root() + "/data/wikitext-2-raw/wiki.test.raw", std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }();
  return t;
}

std::string tokenizer_path(int64_t which) {
  if (which == 0) return std::string(TRITIUM_SOURCE_DIR) + "/models/tiny-bitnet/tokenizer.json";
  return data_root() + (which == 1 ? "/tokenizers/llama3/tokenizer.json" : "/tokenizers/qwen3/tokenizer.json");
}

void BM_Load(benchmark::State& st) {
  const std::string p = tokenizer_path(st.range(0));
  if (!std::filesystem::exists(p)) return st.SkipWithError("tokenizer not found");
  for (auto _ : st) benchmark::DoNotOptimize(tritium::Tokenizer::from_file(p));
}

void BM_Encode(benchmark::State& st) {
  const std::string p = tokenizer_path(st.range(0));
  if (!std::filesystem::exists(p) || text().empty()) return st.SkipWithError("data not found");
  auto tok = tritium::Tokenizer::from_file(p);
  size_t n = 0;
  for (auto _ : st) n = tok->encode(text(), false).size();
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * text().size()));
  st.counters["tokens"] = static_cast<double>(n);
  st.counters["tok/s"] = benchmark::Counter(static_cast<double>(n * st.iterations()), benchmark::Counter::kIsRate);
}

void BM_Decode(benchmark::State& st) {
  const std::string p = tokenizer_path(st.range(0));
  if (!std::filesystem::exists(p) || text().empty()) return st.SkipWithError("data not found");
  auto tok = tritium::Tokenizer::from_file(p);
  const auto ids = tok->encode(text(), false);
  for (auto _ : st) benchmark::DoNotOptimize(tok->decode(ids, true));
  st.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(ids.size() * st.iterations()), benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(BM_Load)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Encode)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Decode)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
