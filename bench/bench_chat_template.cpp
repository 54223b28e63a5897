// Chat template parse and render cost (tiny-bitnet's Llama-3 style template; Qwen3's with tools when
// TRITIUM_TEST_DATA points at shared/).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>

#include "template/chat_template.h"

namespace {

nlohmann::ordered_json conversation(int turns) {
  auto msgs = nlohmann::ordered_json::array();
  msgs.push_back({{"role", "system"}, {"content", "You are a helpful assistant."}});
  for (int i = 0; i < turns; ++i) {
    msgs.push_back({{"role", "user"}, {"content", "Question number " + std::to_string(i) + "?"}});
    msgs.push_back({{"role", "assistant"}, {"content", "Answer number " + std::to_string(i) + "."}});
  }
  msgs.push_back({{"role", "user"}, {"content", "Last question?"}});
  return msgs;
}

std::filesystem::path qwen3_dir() {
  const char* d = std::getenv("TRITIUM_TEST_DATA");
  return d ? std::filesystem::path(d) / "tokenizers/qwen3" : std::filesystem::path();
}

void BM_ParseTiny(benchmark::State& st) {
  auto files = tritium::load_chat_template(std::filesystem::path(TRITIUM_SOURCE_DIR) / "models/tiny-bitnet");
  for (auto _ : st) benchmark::DoNotOptimize(tritium::ChatTemplate::from_string(files.source));
}
BENCHMARK(BM_ParseTiny);

void BM_RenderTiny(benchmark::State& st) {
  auto files = tritium::load_chat_template(std::filesystem::path(TRITIUM_SOURCE_DIR) / "models/tiny-bitnet");
  auto t = tritium::ChatTemplate::from_string(files.source);
  auto msgs = conversation(static_cast<int>(st.range(0)));
  for (auto _ : st) benchmark::DoNotOptimize(tritium::apply_chat_template(t, msgs, true, files.bos_token, files.eos_token));
  st.SetItemsProcessed(st.iterations() * static_cast<int64_t>(msgs.size()));
}
BENCHMARK(BM_RenderTiny)->Arg(1)->Arg(16);

void BM_RenderQwen3Tools(benchmark::State& st) {
  if (!std::filesystem::exists(qwen3_dir() / "tokenizer_config.json")) {
    st.SkipWithError("TRITIUM_TEST_DATA/tokenizers/qwen3 not available");
    return;
  }
  auto files = tritium::load_chat_template(qwen3_dir());
  auto t = tritium::ChatTemplate::from_string(files.source);
  auto msgs = conversation(static_cast<int>(st.range(0)));
  auto tools = nlohmann::ordered_json::parse(
      R"([{"type":"function","function":{"name":"get_weather","description":"Weather in a city",
          "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])");
  for (auto _ : st) benchmark::DoNotOptimize(tritium::apply_chat_template(t, msgs, true, "", files.eos_token, tools));
  st.SetItemsProcessed(st.iterations() * static_cast<int64_t>(msgs.size()));
}
BENCHMARK(BM_RenderQwen3Tools)->Arg(1)->Arg(16);

}  // namespace

BENCHMARK_MAIN();
