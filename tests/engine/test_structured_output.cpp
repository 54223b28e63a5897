// Structured output in the engine: with a grammar, every sampled token is one the grammar's mask allowed (the
// output replayed token by token never leaves the language), every finished output is complete JSON of the
// schema's shape, and greedy output is the same alone and batched — on tiny-bitnet and tiny-qwen2, with the CPU
// sampler, and with the device sampler (the grammar's masks applied on the GPU) when a GPU is present.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "grammar/json_schema.h"
#include "model/loader.h"
#include "server/structured_output.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

using namespace tritium;
using nlohmann::json;

namespace {

const json kSchema = json::parse(R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 10}, "n": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
    "sub": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}]}},
    "required": ["name", "n", "tags", "sub"], "additionalProperties": false})");

void check_shape(const std::string& text) {
  json j;
  ASSERT_NO_THROW(j = json::parse(text)) << text;
  ASSERT_TRUE(j.is_object()) << text;
  ASSERT_EQ(j.size(), 4u) << text;
  EXPECT_TRUE(j["name"].is_string() && j["n"].is_number_integer() && j["tags"].is_array()) << text;
  EXPECT_LE(j["tags"].size(), 3u);
  for (const auto& t : j["tags"]) EXPECT_TRUE(t == "a" || t == "b" || t == "c") << text;
  EXPECT_TRUE(j["sub"].is_null() || (j["sub"].is_object() && j["sub"]["ok"].is_boolean())) << text;
}

void run_model(const std::string& dir, bool cuda = false) {
  set_num_threads(1);
  std::shared_ptr<const Transformer> model = load_transformer(dir);
  const std::shared_ptr<Backend> bep = test::backend_for(model, cuda);
  Backend& be = *bep;
  if (cuda) {
    ASSERT_TRUE(be.samples_on_device());
  }
  auto tok = Tokenizer::from_file(dir + "/tokenizer.json");
  auto vocab = server::make_vocabulary(*tok);
  EngineConfig cfg;
  cfg.num_blocks = 1024;
  cfg.max_num_seqs = 16;
  Engine eng(be, *tok, cfg);
  const std::vector<int32_t> prompt = tok->encode("Here is a record:", true);
  auto request = [&](float temp, uint64_t seed, const std::shared_ptr<grammar::TokenGrammar>& g) {
    EngineRequest r;
    r.prompt = prompt;
    r.max_tokens = 200;
    r.sampling.temperature = temp;
    r.sampling.seed = seed;
    r.constraints.grammar = g;
    return r;
  };
  // Sampled at temperature 1: 32 outputs, all complete and valid; replaying each token through a fresh copy of
  // the grammar shows that no token outside the mask was ever sampled.
  auto g = std::make_shared<grammar::TokenGrammar>(grammar::compile_json_schema(kSchema), vocab);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  const int n = test::under_sanitizer() ? 8 : 32;
  for (int i = 0; i < n; ++i) hs.push_back(eng.add_request(request(1.0f, 100 + i, g)));
  eng.run_until_idle();
  grammar::TokenGrammar replay(grammar::compile_json_schema(kSchema), vocab);
  for (auto& h : hs) {
    const RequestOutput o = h->wait_all();
    EXPECT_EQ(o.finish_reason, "stop") << o.text;
    check_shape(o.text);
    int32_t st = replay.start();
    for (int32_t t : o.token_ids) {
      if (t == *tok->eos_id()) {
        EXPECT_TRUE(replay.accepting(st));
        continue;
      }
      const auto m = replay.mask(st);
      ASSERT_TRUE(m[static_cast<size_t>(t) / 64] >> (t % 64) & 1) << "masked token " << t << " in " << o.text;
      st = replay.advance(st, vocab->bytes(t));
    }
    EXPECT_TRUE(replay.accepting(st)) << o.text;
  }
  // Greedy: alone, then among 7 sampled batch mates, identical.
  auto alone_h = eng.add_request(request(0.0f, 0, g));
  eng.run_until_idle();
  const RequestOutput alone = alone_h->wait_all();
  check_shape(alone.text);
  std::vector<std::shared_ptr<RequestHandle>> mix;
  for (int i = 0; i < 8; ++i) mix.push_back(eng.add_request(request(i == 3 ? 0.0f : 1.0f, 7 + i, g)));
  eng.run_until_idle();
  for (int i = 0; i < 8; ++i) {
    const RequestOutput o = mix[static_cast<size_t>(i)]->wait_all();
    if (i == 3) {
      EXPECT_EQ(o.token_ids, alone.token_ids) << o.text << " vs " << alone.text;
    }
  }
}

}  // namespace

TEST(StructuredOutput, TinyBitnetFollowsTheSchema) { run_model(test::bundled_model()); }

TEST(StructuredOutput, TinyQwen2FollowsTheSchema) {
  REQUIRE_SHARED_DATA(shared);
  run_model(shared + "/models/tiny-qwen2");
}

TEST(StructuredOutput, TinyBitnetFollowsTheSchemaCuda) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA)";
  run_model(test::bundled_model(), true);
}

// A grammar that cannot complete within max_tokens ends with "length" (and its text is a valid prefix).
TEST(StructuredOutput, IncompleteAtMaxTokensEndsWithLength) {
  set_num_threads(1);
  auto model = load_transformer(test::bundled_model());
  CpuBackend be(*model);
  auto tok = Tokenizer::from_file(test::bundled_model() + "/tokenizer.json");
  EngineConfig cfg;
  cfg.num_blocks = 64;
  Engine eng(be, *tok, cfg);
  EngineRequest r;
  r.prompt = tok->encode("x", true);
  r.max_tokens = 3;
  r.constraints.grammar = std::make_shared<grammar::TokenGrammar>(
      grammar::compile_json_schema(json::parse(R"({"type": "array", "items": {"type": "integer"}, "minItems": 20})")),
      server::make_vocabulary(*tok));
  auto h = eng.add_request(r);
  eng.run_until_idle();
  const RequestOutput o = h->wait_all();
  EXPECT_EQ(o.finish_reason, "length");
  EXPECT_EQ(o.text.rfind("[", 0), 0u) << o.text;
}
