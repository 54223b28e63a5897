// Greedy generation and perplexity against the Hugging Face goldens.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "eval/perplexity.h"
#include "eval/text_file.h"
#include "model/loader.h"
#include "backend/cuda/cuda_backend.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "test_util.h"

using namespace tritium;

namespace {

nlohmann::json read_json(const std::string& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// Greedy ids of the golden prompts, with `lm_head` and KV dtype `kv`; `agree` (when given) receives, per prompt,
// how many of the golden's tokens agree instead of the test asserting them.
void check_greedy(const std::string& model_dir, const std::string& golden_path, TernaryFormat fmt, bool cuda = false,
                  KvDType kv = KvDType::kF32, const std::string& lm_head = "", std::vector<size_t>* agree = nullptr) {
  LoadOptions lo;
  lo.ternary_format = fmt;
  lo.lm_head = lm_head;
  auto model = test::backend_for(load_transformer(model_dir, lo), cuda);
  auto tok = Tokenizer::from_file(model_dir + "/tokenizer.json");
  auto golden = read_json(golden_path);
  Generator gen(*model, *tok);
  for (const auto& pr : golden["prompts"]) {
    const auto ids = gen.encode_prompt(pr["text"].get<std::string>());
    ASSERT_EQ(ids, pr["input_ids"].get<std::vector<int32_t>>());
    const auto want = pr["greedy_ids"].get<std::vector<int32_t>>();
    GenerateOptions go;
    go.max_new_tokens = static_cast<int>(want.size());
    go.sampling.temperature = 0;
    go.ignore_eos = true;
    go.kv_dtype = kv;
    std::string text;
    auto got = gen.generate(ids, go, [&](const std::string& s) { text += s; }, nullptr);
    // The issue demands at least the first 32 tokens; we report how many of the 48 agree.
    size_t same = 0;
    while (same < got.size() && same < want.size() && got[same] == want[same]) ++same;
    if (agree) {
      agree->push_back(same);
      continue;
    }
    EXPECT_GE(same, 32u) << pr["text"];
    std::printf("  %-50.50s %zu/%zu greedy tokens equal\n", pr["text"].get<std::string>().c_str(), same, want.size());
    if (same == want.size()) {
      EXPECT_EQ(text, pr["greedy_text"].get<std::string>());
    }
  }
}

LoadOptions i2_options() {
  LoadOptions o;
  o.ternary_format = TernaryFormat::kI2;
  return o;
}

double ppl_of(const std::string& model_dir, const std::string& text_path, int ctx, int chunks, bool cuda = false,
              KvDType kv = KvDType::kF32, const std::string& lm_head = "") {
  LoadOptions lo = i2_options();
  lo.lm_head = lm_head;
  auto model = test::backend_for(load_transformer(model_dir, lo), cuda);
  auto tok = Tokenizer::from_file(model_dir + "/tokenizer.json");
  const auto tokens = tok->encode(read_text_universal_newlines(text_path), false);
  PerplexityOptions po;
  po.n_ctx = ctx;
  po.max_chunks = chunks;
  po.bos_id = *model->model().config().bos_token_id;
  po.kv_dtype = kv;
  po.kv_scale = calibrate_kv_scale(*model, kv, tok->encode(kv_calibration_text(), true));  // 1 for float caches
  auto r = compute_perplexity(*model, tokens, po);
  EXPECT_EQ(r.scored_tokens, static_cast<int64_t>(chunks) * (ctx - 1 - ctx / 2));
  return r.ppl;
}

}  // namespace

TEST(GenerationGolden, TinyBitnetGreedyEveryFormat) {
  const std::string g = test::data_dir() + "/golden/tiny-bitnet.json";
  for (auto f : {TernaryFormat::kInt8, TernaryFormat::kI2, TernaryFormat::kTQ1, TernaryFormat::kBitcos}) {
    SCOPED_TRACE(std::string(ternary_format_name(f)));
    check_greedy(test::bundled_model(), g, f);
    if (test::under_sanitizer()) break;  // one format is enough under ASan; all are checked in Release
  }
}

TEST(GenerationGolden, TinyQwen2Greedy) {
  REQUIRE_SHARED_DATA(s);
  check_greedy(s + "/models/tiny-qwen2", s + "/golden/tiny-qwen2.json", TernaryFormat::kI2);
}

// Perplexity within 0.5% of the golden values: wiki.test.raw and 2852-0.txt, ctx 512, 40 chunks, both models.
static void check_ppl(bool cuda, KvDType kv = KvDType::kF32) {
  REQUIRE_SHARED_DATA(s);
  if (test::under_sanitizer()) GTEST_SKIP() << "40-chunk perplexity runs in the Release suite only (too slow under ASan)";
  struct Case { std::string model, golden, text, key; };
  const std::vector<Case> cases = {
      {test::bundled_model(), test::data_dir() + "/golden/tiny-bitnet.json", s + "/data/wikitext-2-raw/wiki.test.raw", "wiki.test.raw@512"},
      {test::bundled_model(), test::data_dir() + "/golden/tiny-bitnet.json", s + "/data/books-eval/2852-0.txt", "2852-0.txt@512"},
      {s + "/models/tiny-qwen2", s + "/golden/tiny-qwen2.json", s + "/data/wikitext-2-raw/wiki.test.raw", "wiki.test.raw@512"},
      {s + "/models/tiny-qwen2", s + "/golden/tiny-qwen2.json", s + "/data/books-eval/2852-0.txt", "2852-0.txt@512"},
  };
  for (const auto& c : cases) {
    const double want = read_json(c.golden)["perplexity"][c.key]["ppl"].get<double>();
    const double got = ppl_of(c.model, c.text, 512, 40, cuda, kv);
    std::printf("  [%s, KV %s] %s %s: ppl %.4f (golden %.4f, %+.3f%%)\n", cuda ? "cuda" : "cpu", std::string(kv_dtype_name(kv)).c_str(),
                c.model.c_str(), c.key.c_str(), got, want, 100.0 * (got - want) / want);
    EXPECT_NEAR(got, want, 0.005 * want) << c.model << " " << c.key;
  }
}

TEST(PerplexityGolden, BothModelsBothTexts) { check_ppl(false); }

// The default head ("auto": the head as the checkpoint stores it) is faithful: every golden token of both models.
TEST(GenerationGolden, DefaultHeadGreedyEqualsGolden) {
  for (const auto& [model, golden] : std::vector<std::pair<std::string, std::string>>{
           {test::bundled_model(), test::data_dir() + "/golden/tiny-bitnet.json"},
           {test::shared_dir() + "/models/tiny-qwen2", test::shared_dir() + "/golden/tiny-qwen2.json"}}) {
    if (!std::filesystem::exists(golden)) continue;  // tiny-qwen2 lives in the shared test data
    SCOPED_TRACE(model);
    std::vector<size_t> agree;
    check_greedy(model, golden, TernaryFormat::kI2, false, KvDType::kF32, "auto", &agree);
    const auto g = read_json(golden);
    for (size_t i = 0; i < agree.size(); ++i)
      EXPECT_EQ(agree[i], g["prompts"][i]["greedy_ids"].size()) << g["prompts"][i]["text"];
  }
}

// The opt-in smaller heads (int8, q6, q4) on the ternary model: greedy-equal (>= 32 of 48 tokens) except where the
// golden's next token wins by a near-tie that the quantized head flips: there the exact (bf16) head's margin between
// the golden token and the quantized head's choice is below 0.1 logits. (Measured: prompt 0 leaves the golden after
// 4 tokens at a margin of 0.0088 with the int8, q6 and q4 heads; with q6, prompt 2 too, at 0.0637.)
TEST(GenerationGolden, QuantizedHeadsLeaveTheGoldenOnlyAtNearTies) {
  const std::string g = test::data_dir() + "/golden/tiny-bitnet.json";
  LoadOptions lo = i2_options();
  lo.lm_head = "bf16";
  auto exact = test::cpu_backend(load_transformer(test::bundled_model(), lo));
  const auto golden = read_json(g);
  const int V = exact->model().vocab_size();
  for (const std::string head : {"int8", "q6", "q4"}) {
    SCOPED_TRACE(head);
    std::vector<size_t> agree;
    check_greedy(test::bundled_model(), g, TernaryFormat::kI2, false, KvDType::kF32, head, &agree);
    lo.lm_head = head;
    auto quant = test::cpu_backend(load_transformer(test::bundled_model(), lo));
    for (size_t i = 0; i < agree.size(); ++i) {
      const auto& pr = golden["prompts"][i];
      const auto want = pr["greedy_ids"].get<std::vector<int32_t>>();
      if (agree[i] >= 32) continue;
      std::vector<int32_t> ids = pr["input_ids"].get<std::vector<int32_t>>();
      ids.insert(ids.end(), want.begin(), want.begin() + static_cast<std::ptrdiff_t>(agree[i]));
      const std::vector<float> le = test::prompt_logits(*exact, ids), lq = test::prompt_logits(*quant, ids);
      const float* e = &le[(ids.size() - 1) * V];
      const float* q = &lq[(ids.size() - 1) * V];
      const int32_t chosen = static_cast<int32_t>(std::max_element(q, q + V) - q);
      const float margin = e[want[agree[i]]] - e[chosen];
      std::printf("  %s head, prompt %zu: leaves the golden after %zu tokens: exact-head margin %.4f\n", head.c_str(), i,
                  agree[i], margin);
      EXPECT_LT(margin, 0.1f) << pr["text"];
    }
    if (test::under_sanitizer()) break;  // one head is enough under ASan; all are checked in Release
  }
}

// The q6 head's perplexity stays within 0.3% of the bf16 head on the golden texts (README, `--lm-head q6`).
TEST(PerplexityGolden, Q6HeadWithinPointThreePercentOfBf16) {
  REQUIRE_SHARED_DATA(s);
  if (test::under_sanitizer()) GTEST_SKIP() << "40-chunk perplexity runs in the Release suite only (too slow under ASan)";
  for (const std::string& text : {s + "/data/wikitext-2-raw/wiki.test.raw", s + "/data/books-eval/2852-0.txt"}) {
    const double bf16 = ppl_of(test::bundled_model(), text, 512, 40, false, KvDType::kF32, "bf16");
    const double q6 = ppl_of(test::bundled_model(), text, 512, 40, false, KvDType::kF32, "q6");
    std::printf("  %s: ppl bf16 head %.4f, q6 head %.4f (%+.3f%%)\n", text.c_str(), bf16, q6, 100.0 * (q6 - bf16) / bf16);
    EXPECT_NEAR(q6, bf16, 0.003 * bf16) << text;
  }
}

#define REQUIRE_CUDA_DEVICE() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): CUDA golden test skipped"

TEST(PerplexityGolden, BothModelsBothTextsCuda) {
  REQUIRE_CUDA_DEVICE();
  check_ppl(true);
}

// The CUDA backend's bf16 KV cache (the default of --device cuda).
TEST(PerplexityGolden, BothModelsBothTextsCudaBf16Kv) {
  REQUIRE_CUDA_DEVICE();
  check_ppl(true, KvDType::kBF16);
}

// The CUDA backend's fp8 e4m3 KV cache (--kv-cache-dtype fp8) with the calibrated per-tensor scale.
TEST(PerplexityGolden, BothModelsBothTextsCudaFp8Kv) {
  REQUIRE_CUDA_DEVICE();
  check_ppl(true, KvDType::kFP8E4M3);
}

// Greedy with the bf16 KV cache on tiny-qwen2. tiny-bitnet is left out: its first prompt has near-tied logits, and
// a bf16 cache changes its 5th greedy token on the CPU as on the GPU (bench/RESULTS.md, "KV cache on the GPU").
TEST(GenerationGolden, TinyQwen2GreedyCudaBf16Kv) {
  REQUIRE_CUDA_DEVICE();
  REQUIRE_SHARED_DATA(s);
  check_greedy(s + "/models/tiny-qwen2", s + "/golden/tiny-qwen2.json", TernaryFormat::kI2, true, KvDType::kBF16);
}

TEST(GenerationGolden, TinyBitnetGreedyCuda) {
  REQUIRE_CUDA_DEVICE();
  check_greedy(test::bundled_model(), test::data_dir() + "/golden/tiny-bitnet.json", TernaryFormat::kI2, true);
}

TEST(GenerationGolden, TinyQwen2GreedyCuda) {
  REQUIRE_CUDA_DEVICE();
  REQUIRE_SHARED_DATA(s);
  check_greedy(s + "/models/tiny-qwen2", s + "/golden/tiny-qwen2.json", TernaryFormat::kI2, true);
}

// A short perplexity run that also runs under the sanitizers: ctx 256, 2 chunks, against the same procedure
// computed by hand from full logits of each chunk.
TEST(PerplexityGolden, ProcedureMatchesHandComputation) {
  auto model = test::cpu_backend(load_transformer(test::bundled_model(), i2_options()));
  std::vector<int32_t> tokens;
  for (int i = 0; i < 2 * 63 + 5; ++i) tokens.push_back((i * 37 + 11) % 8000 + 5);
  PerplexityOptions po;
  po.n_ctx = 64;
  po.max_chunks = 2;
  auto r = compute_perplexity(*model, tokens, po);
  ASSERT_EQ(r.chunks, 2);
  ASSERT_EQ(r.scored_tokens, 2 * 31);
  // Hand computation: chunk c = [BOS] + tokens[c*63 : (c+1)*63]; positions 32..62 predict the next token.
  double nll = 0;
  for (int c = 0; c < 2; ++c) {
    std::vector<int32_t> chunk = {0};
    chunk.insert(chunk.end(), tokens.begin() + c * 63, tokens.begin() + (c + 1) * 63);
    KvCacheSpec spec{model->model().config().num_layers, model->model().config().num_kv_heads, model->model().config().head_dim, 16, 4};
    KvCache cache(spec);
    std::vector<int32_t> bt = {0, 1, 2, 3};
    BatchChunk ch{chunk, 0, bt, true};
    std::vector<float> logits;
    model->forward(std::span<const BatchChunk>(&ch, 1), cache, logits);
    for (int p = 32; p <= 62; ++p) {
      const float* row = &logits[static_cast<size_t>(p) * 8192];
      double mx = -1e30, se = 0;
      for (int v = 0; v < 8192; ++v) mx = std::max(mx, static_cast<double>(row[v]));
      for (int v = 0; v < 8192; ++v) se += std::exp(row[v] - mx);
      nll -= row[chunk[p + 1]] - mx - std::log(se);
    }
  }
  EXPECT_NEAR(r.ppl, std::exp(nll / 62), 1e-4 * r.ppl);
}
