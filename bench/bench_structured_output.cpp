// Cost of structured output in decoding: 16 concurrent requests on the bundled model (CPU, 1 thread), 48 tokens
// each, without a grammar, with one JSON Schema grammar shared by all (as the server's GrammarCache gives), and
// with a fresh grammar per request (cold mask caches). Counter tok/s: generated tokens per second; the ratio of
// the shared / fresh rows to the plain row is the grammar's share of a decode step.
// The vocabulary is the bundled model's (tiny-bitnet); bench/RESULTS.md reports it with the Llama 3 vocabulary too.
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "core/parallel.h"
#include "engine/engine.h"
#include "grammar/json_schema.h"
#include "model/loader.h"
#include "server/structured_output.h"

using namespace tritium;

namespace {

const char* kSchema = R"({"type": "array", "items": {"type": "object", "properties": {
    "name": {"type": "string"}, "n": {"type": "integer"}, "ok": {"type": "boolean"}},
    "required": ["name", "n", "ok"]}, "minItems": 40})";

struct Setup {
  std::unique_ptr<Transformer> model;
  std::unique_ptr<Tokenizer> tok;
  std::shared_ptr<const grammar::Vocabulary> vocab;
  Setup() {
    set_num_threads(1);
    const std::string dir = std::string(TRITIUM_SOURCE_DIR) + "/models/tiny-bitnet";
    model = load_transformer(dir);
    tok = Tokenizer::from_file(dir + "/tokenizer.json");
    vocab = server::make_vocabulary(*tok);
  }
};
Setup& setup() {
  static Setup s;
  return s;
}

// mode 0: no grammar, 1: one shared grammar, 2: a fresh grammar per request.
void BM_Decode16(benchmark::State& st) {
  Setup& s = setup();
  CpuBackend be(*s.model);
  EngineConfig cfg;
  cfg.num_blocks = 512;
  cfg.max_num_seqs = 16;
  Engine eng(be, *s.tok, cfg);
  const auto schema = nlohmann::json::parse(kSchema);
  auto shared = std::make_shared<grammar::TokenGrammar>(grammar::compile_json_schema(schema), s.vocab);
  int64_t tokens = 0;
  for (auto _ : st) {
    std::vector<std::shared_ptr<RequestHandle>> hs;
    for (int i = 0; i < 16; ++i) {
      EngineRequest r;
      r.prompt = s.tok->encode("Record " + std::to_string(i) + ":", true);
      r.max_tokens = 48;
      r.ignore_eos = true;
      r.sampling.temperature = 1.0f;
      r.sampling.seed = static_cast<uint64_t>(i);
      if (st.range(0) == 1) r.constraints.grammar = shared;
      if (st.range(0) == 2)
        r.constraints.grammar = std::make_shared<grammar::TokenGrammar>(grammar::compile_json_schema(schema), s.vocab);
      hs.push_back(eng.add_request(r));
    }
    eng.run_until_idle();
    for (auto& h : hs) tokens += h->wait_all().completion_tokens;
  }
  st.counters["tok/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Decode16)->ArgName("grammar")->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
