// GGUF models end to end: tiny-bitnet from each ternary GGUF (I2_S, TQ2_0, F16) against the Hugging Face goldens
// and the safetensors path (greedy tokens, prompt logits, perplexity), tiny-qwen2 Q8_0, a llama file with
// llama.cpp's q/k permutation, `convert` and `inspect` on GGUF, and damaged files at the command line (one
// `error:` line, exit 1).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <random>

#include "core/dtype.h"
#include "core/error.h"
#include "engine/generator.h"
#include "eval/perplexity.h"
#include "eval/text_file.h"
#include "gguf_test_util.h"
#include "io/safetensors.h"
#include "model/gguf_config.h"
#include "model/source_gguf.h"
#include "model/loader.h"
#include "model/model_files.h"

using namespace tritium;
namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const std::string& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

LoadOptions i2() {
  LoadOptions o;
  o.ternary_format = TernaryFormat::kI2;
  return o;
}

using test::prompt_logits;

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

// Greedy 48 tokens of every golden prompt; returns how many prompts match all 48 (and prints the counts).
int greedy_prompts_equal(Backend& be, const Tokenizer& tok, const std::string& golden_path) {
  const auto golden = read_json(golden_path);
  Generator gen(be, tok);
  int equal = 0;
  for (const auto& pr : golden["prompts"]) {
    const auto ids = gen.encode_prompt(pr["text"].get<std::string>());
    EXPECT_EQ(ids, pr["input_ids"].get<std::vector<int32_t>>());
    const auto want = pr["greedy_ids"].get<std::vector<int32_t>>();
    GenerateOptions go;
    go.max_new_tokens = static_cast<int>(want.size());
    go.sampling.temperature = 0;
    go.ignore_eos = true;
    std::string text;
    const auto got = gen.generate(ids, go, [&](const std::string& s) { text += s; }, nullptr);
    size_t same = 0;
    while (same < got.size() && same < want.size() && got[same] == want[same]) ++same;
    std::printf("    %-50.50s %zu/%zu greedy tokens equal\n", pr["text"].get<std::string>().c_str(), same, want.size());
    if (same == want.size() && text == pr["greedy_text"].get<std::string>()) ++equal;
  }
  return equal;
}

double ppl(Backend& be, const Tokenizer& tok, const std::string& text_path) {
  const auto tokens = tok.encode(read_text_universal_newlines(text_path), false);
  PerplexityOptions po;
  po.n_ctx = 512;
  po.max_chunks = 40;
  po.bos_id = *be.model().config().bos_token_id;
  return compute_perplexity(be, tokens, po).ppl;
}

// tiny-bitnet from one GGUF file: greedy = goldens on all 4 prompts, prompt logits within the safetensors path's
// tolerance of the golden logits (ModelGolden: max 0.5, mean 0.05) and close to the safetensors path itself.
void check_tiny_bitnet(const std::string& gguf) {
  test::OneThread one;
  auto be = test::cpu_backend(load_transformer(gguf, i2()));
  auto st = test::cpu_backend(load_transformer(test::bundled_model(), i2()));
  const auto tok = load_model_tokenizer(gguf);
  const std::string g = test::data_dir() + "/golden/tiny-bitnet.json";
  EXPECT_EQ(greedy_prompts_equal(*be, *tok, g), 4);
  const auto golden = read_json(g);
  auto ref = WeightStore::from_file(test::data_dir() + "/golden/tiny-bitnet.logits.safetensors");
  for (size_t i = 0; i < golden["prompts"].size(); ++i) {
    const auto ids = golden["prompts"][i]["input_ids"].get<std::vector<int32_t>>();
    const auto lg = prompt_logits(*be, ids), ls = prompt_logits(*st, ids);
    const auto gold = tensor_to_f32(ref->get("logits_" + std::to_string(i)));
    double mean = 0;
    for (size_t k = 0; k < lg.size(); ++k) mean += std::fabs(lg[k] - gold[k]);
    mean /= static_cast<double>(lg.size());
    const double vs_gold = max_abs_diff(lg, gold), vs_st = max_abs_diff(lg, ls);
    std::printf("    prompt %zu: max |dlogit| vs golden %.3g (mean %.3g), vs safetensors path %.3g\n", i, vs_gold, mean,
                vs_st);
    EXPECT_LE(vs_gold, 0.5);
    EXPECT_LE(mean, 0.05);
    EXPECT_LE(vs_st, 0.5);
  }
}

void check_tiny_bitnet_ppl(const std::string& gguf) {
  REQUIRE_SHARED_DATA(s);
  if (test::under_sanitizer()) GTEST_SKIP() << "40-chunk perplexity runs in the Release suite only (too slow under ASan)";
  auto be = test::cpu_backend(load_transformer(gguf, i2()));
  const auto tok = load_model_tokenizer(gguf);
  const auto golden = read_json(test::data_dir() + "/golden/tiny-bitnet.json");
  for (const auto& [text, key] : {std::pair{"/data/wikitext-2-raw/wiki.test.raw", "wiki.test.raw@512"},
                                  std::pair{"/data/books-eval/2852-0.txt", "2852-0.txt@512"}}) {
    const double want = golden["perplexity"][key]["ppl"].get<double>();
    const double got = ppl(*be, *tok, s + text);
    std::printf("    %s %s: ppl %.4f (golden %.4f, %+.3f%%)\n", fs::path(gguf).filename().c_str(), key, got, want,
                100.0 * (got - want) / want);
    EXPECT_NEAR(got, want, 0.005 * want) << key;
  }
}

}  // namespace

TEST(GgufModel, TinyBitnetI2sGreedyAndLogits) {
  REQUIRE_GGUF_FIXTURES(dir);
  check_tiny_bitnet(dir + "/tiny-bitnet-I2_S.gguf");
}
TEST(GgufModel, TinyBitnetTq2GreedyAndLogits) {
  REQUIRE_GGUF_FIXTURES(dir);
  check_tiny_bitnet(dir + "/tiny-bitnet-TQ2_0.gguf");
}
TEST(GgufModel, TinyBitnetF16GreedyAndLogits) {
  REQUIRE_GGUF_FIXTURES(dir);
  check_tiny_bitnet(dir + "/tiny-bitnet-F16.gguf");
}
TEST(GgufModel, TinyBitnetI2sPerplexity) {
  REQUIRE_GGUF_FIXTURES(dir);
  check_tiny_bitnet_ppl(dir + "/tiny-bitnet-I2_S.gguf");
}
TEST(GgufModel, TinyBitnetTq2Perplexity) {
  REQUIRE_GGUF_FIXTURES(dir);
  check_tiny_bitnet_ppl(dir + "/tiny-bitnet-TQ2_0.gguf");
}
TEST(GgufModel, TinyBitnetF16Perplexity) {
  REQUIRE_GGUF_FIXTURES(dir);
  check_tiny_bitnet_ppl(dir + "/tiny-bitnet-F16.gguf");
}

// Every GGUF ternary file builds the same projections as the safetensors folder: same values, same scales, so
// the three files give one set of logits.
TEST(GgufModel, TernaryFilesBuildTheSafetensorsProjections) {
  REQUIRE_GGUF_FIXTURES(dir);
  test::OneThread one;
  auto st = load_transformer(test::bundled_model(), i2());
  for (const char* f : {"tiny-bitnet-I2_S.gguf", "tiny-bitnet-TQ2_0.gguf", "tiny-bitnet-F16.gguf"}) {
    SCOPED_TRACE(f);
    auto g = load_transformer(dir + "/" + f, i2());
    EXPECT_EQ(g->config().hidden_act, Activation::kRelu2);
    EXPECT_TRUE(g->config().bitnet_quant && g->config().sub_norms && g->config().tie_word_embeddings);
    EXPECT_EQ(g->config().rope_theta, 500000.0);
    EXPECT_EQ(g->config().eos_token_ids, std::vector<int32_t>{1});
    for (size_t l = 0; l < st->layers().size(); ++l) {
      const Linear* a[4] = {st->layers()[l].qkv.get(), st->layers()[l].o.get(), st->layers()[l].gate_up.get(),
                            st->layers()[l].down.get()};
      const Linear* b[4] = {g->layers()[l].qkv.get(), g->layers()[l].o.get(), g->layers()[l].gate_up.get(),
                            g->layers()[l].down.get()};
      for (int i = 0; i < 4; ++i) {
        const auto* ta = dynamic_cast<const TernaryLinear*>(a[i]);
        const auto* tb = dynamic_cast<const TernaryLinear*>(b[i]);
        ASSERT_TRUE(ta && tb);
        const auto ba = ta->packed().buffers(), bb = tb->packed().buffers();
        ASSERT_EQ(ba.size(), bb.size());
        EXPECT_TRUE(std::equal(ba[0].bytes.begin(), ba[0].bytes.end(), bb[0].bytes.begin(), bb[0].bytes.end()));
        ASSERT_EQ(ta->segments().size(), tb->segments().size());
        for (size_t s = 0; s < ta->segments().size(); ++s) EXPECT_EQ(ta->segments()[s].scale, tb->segments()[s].scale);
      }
      EXPECT_EQ(st->layers()[l].attn_sub_norm, g->layers()[l].attn_sub_norm);
    }
  }
}

// tiny-qwen2 Q8_0: the prompt logits are the Q8_0 weights' own (within 0.2 of the bf16 goldens, every prompt argmax
// equal), perplexity within 1% of bf16, and greedy decoding leaves the goldens only at near-ties: where the bf16
// model's margin between the golden token and the one Q8_0 picks is smaller than the Q8_0 logit error itself.
TEST(GgufModel, TinyQwen2Q8_0) {
  REQUIRE_GGUF_FIXTURES(dir);
  REQUIRE_SHARED_DATA(s);
  const std::string gguf = dir + "/tiny-qwen2-Q8_0.gguf";
  auto be = test::cpu_backend(load_transformer(gguf, i2()));
  EXPECT_TRUE(be->model().config().qkv_bias);
  EXPECT_FALSE(be->model().config().o_bias);
  const auto tok = load_model_tokenizer(gguf);
  const auto golden = read_json(s + "/golden/tiny-qwen2.json");
  {
    test::OneThread one;
    auto ref = WeightStore::from_file(s + "/golden/tiny-qwen2.logits.safetensors");
    double q8_error = 0;
    for (size_t i = 0; i < 4; ++i) {
      const auto ids = golden["prompts"][i]["input_ids"].get<std::vector<int32_t>>();
      const auto lg = prompt_logits(*be, ids);
      const auto gold = tensor_to_f32(ref->get("logits_" + std::to_string(i)));
      for (size_t p = 0; p < ids.size(); ++p)
        EXPECT_EQ(std::max_element(&lg[p * 8192], &lg[p * 8192] + 8192) - &lg[p * 8192],
                  std::max_element(&gold[p * 8192], &gold[p * 8192] + 8192) - &gold[p * 8192])
            << "prompt " << i << " position " << p;
      const double d = max_abs_diff(lg, gold);
      std::printf("    prompt %zu: max |dlogit| Q8_0 vs bf16 golden %.4f\n", i, d);
      EXPECT_LE(d, 0.2);
      q8_error = std::max(q8_error, d);
    }
    const int equal = greedy_prompts_equal(*be, *tok, s + "/golden/tiny-qwen2.json");
    std::printf("    Q8_0: %d of 4 prompts greedy-equal to the goldens over all 48 tokens\n", equal);
    // Teacher-forced along each golden continuation: at the first step where Q8_0 picks another token, the bf16
    // model (tritium's bf16 forward equals the goldens to 1e-5) must have had a margin below the Q8_0 error.
    auto bf16 = test::cpu_backend(load_transformer(s + "/models/tiny-qwen2", i2()));
    for (const auto& pr : golden["prompts"]) {
      auto ids = pr["input_ids"].get<std::vector<int32_t>>();
      for (int32_t want : pr["greedy_ids"].get<std::vector<int32_t>>()) {
        const auto lq = prompt_logits(*be, ids), lb = prompt_logits(*bf16, ids);
        const float* q = &lq[lq.size() - 8192];
        const float* b = &lb[lb.size() - 8192];
        const auto pick = static_cast<int32_t>(std::max_element(q, q + 8192) - q);
        if (pick != want) {
          const double margin = b[want] - b[pick];
          std::printf("    leaves the golden after %zu tokens: bf16 margin %.4f < Q8_0 error %.4f\n",
                      ids.size() - pr["input_ids"].size(), margin, q8_error);
          EXPECT_LT(margin, q8_error);
          break;
        }
        ids.push_back(want);
      }
    }
  }
  if (test::under_sanitizer()) return;
  for (const auto& [text, key] : {std::pair{"/data/wikitext-2-raw/wiki.test.raw", "wiki.test.raw@512"},
                                  std::pair{"/data/books-eval/2852-0.txt", "2852-0.txt@512"}}) {
    // The bf16 golden is also tritium's bf16 figure (PerplexityGolden: within 0.001%).
    const double bf16 = golden["perplexity"][key]["ppl"].get<double>();
    const double got = ppl(*be, *tok, s + text);
    std::printf("    tiny-qwen2 Q8_0 %s: ppl %.4f (bf16 %.4f, %+.3f%%)\n", key, got, bf16, 100.0 * (got - bf16) / bf16);
    EXPECT_NEAR(got, bf16, 0.01 * bf16) << key;
  }
}

// --quant applies to a float GGUF model as to safetensors: ternary-absmean of the Q8_0 weights.
TEST(GgufModel, QuantOptionOnAFloatGguf) {
  REQUIRE_GGUF_FIXTURES(dir);
  test::OneThread one;
  LoadOptions lo = i2();
  lo.quant = "int8-rowwise";
  auto m = load_transformer(dir + "/tiny-qwen2-Q8_0.gguf", lo);
  EXPECT_EQ(m->layers()[0].qkv->format_name(), "rowwise");
  lo.quant = "ternary-absmean";
  EXPECT_EQ(load_transformer(dir + "/tiny-qwen2-Q8_0.gguf", lo)->layers()[0].qkv->format_name(), "ternary-i2");
  lo.quant = "int8-rowwise";
  try {
    load_transformer(dir + "/tiny-bitnet-I2_S.gguf", lo);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("this BitNet model is already ternary"), std::string::npos) << e.what();
  }
}

namespace {

// tiny-qwen2's bf16 weights as a GGUF of architecture `arch`; for "llama" the q/k rows (and biases) of every head
// permuted as llama.cpp's converter does for its interleaved RoPE (LlamaModel.permute: rows (half, i) -> (i, half)).
void write_qwen2_as(const std::string& shared, const std::string& arch, const std::string& out) {
  auto st = WeightStore::from_file(shared + "/models/tiny-qwen2/model.safetensors");
  test::GgufWriter w;
  w.add_string("general.architecture", arch);
  const std::string p = arch + ".";
  w.add_u32(p + "block_count", 8);
  w.add_u32(p + "context_length", 1024);
  w.add_u32(p + "embedding_length", 256);
  w.add_u32(p + "feed_forward_length", 768);
  w.add_u32(p + "attention.head_count", 4);
  w.add_u32(p + "attention.head_count_kv", 2);
  w.add_f32(p + "rope.freq_base", 10000.0f);
  w.add_f32(p + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.add_u32("tokenizer.ggml.bos_token_id", 0);
  w.add_u32("tokenizer.ggml.eos_token_id", 1);
  for (const std::string& name : st->names()) {
    const TensorView& t = st->get(name);
    ASSERT_EQ(t.dtype, DType::BF16) << name;
    std::vector<uint8_t> bytes(t.data, t.data + t.nbytes);
    const bool q = name.find("q_proj") != std::string::npos, k = name.find("k_proj") != std::string::npos;
    if (arch == "llama" && (q || k)) {
      const int64_t heads = q ? 4 : 2, rows = t.shape[0], d = rows / heads;
      const int64_t row_bytes = static_cast<int64_t>(t.nbytes) / rows;
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t half = 0; half < 2; ++half)
          for (int64_t i = 0; i < d / 2; ++i)
            std::memcpy(&bytes[static_cast<size_t>((h * d + 2 * i + half) * row_bytes)],
                        t.data + (h * d + half * d / 2 + i) * row_bytes, static_cast<size_t>(row_bytes));
    }
    std::vector<int64_t> ne(t.shape.rbegin(), t.shape.rend());
    w.add_tensor(gguf_tensor_name(name), 30, ne, std::move(bytes));
  }
  test::write_bytes(out, w.bytes());
}

}  // namespace

// A llama GGUF (q/k permuted by the converter) loads to the model of the safetensors folder it came from: the loader
// undoes the permutation, bit for bit; the same bytes read without it (as a qwen2 file) are a different model.
TEST(GgufModel, LlamaQkPermutationIsUndone) {
  REQUIRE_SHARED_DATA(s);
  test::OneThread one;
  test::TempDir d;
  write_qwen2_as(s, "llama", d.file("llama.gguf"));
  write_qwen2_as(s, "qwen2", d.file("qwen2.gguf"));
  auto st = test::cpu_backend(load_transformer(s + "/models/tiny-qwen2"));
  auto llama = test::cpu_backend(load_transformer(d.file("llama.gguf")));
  auto qwen2 = test::cpu_backend(load_transformer(d.file("qwen2.gguf")));
  EXPECT_EQ(llama->model().config().arch, Arch::kLlama);
  EXPECT_TRUE(llama->model().config().qkv_bias);
  const auto golden = read_json(s + "/golden/tiny-qwen2.json");
  const auto ids = golden["prompts"][0]["input_ids"].get<std::vector<int32_t>>();
  const auto ref = prompt_logits(*st, ids);
  EXPECT_EQ(max_abs_diff(prompt_logits(*qwen2, ids), ref), 0.0);
  EXPECT_EQ(max_abs_diff(prompt_logits(*llama, ids), ref), 0.0);
  // The permuted bytes read as qwen2 (no un-permutation): not the same model.
  write_qwen2_as(s, "llama", d.file("permuted.gguf"));
  auto bytes = test::read_bytes(d.file("permuted.gguf"));
  const std::string from = "llama", to = "qwen2";
  for (size_t i = 0; i + 5 <= bytes.size(); ++i)
    if (std::equal(from.begin(), from.end(), bytes.begin() + static_cast<int64_t>(i))) std::copy(to.begin(), to.end(), bytes.begin() + static_cast<int64_t>(i));
  test::write_bytes(d.file("permuted.gguf"), bytes);
  const double wrong = max_abs_diff(prompt_logits(*test::cpu_backend(load_transformer(d.file("permuted.gguf"))), ids), ref);
  std::printf("    permuted q/k read without un-permuting: max |dlogit| %.3g\n", wrong);
  EXPECT_GT(wrong, 0.05);
}

namespace {

// The configuration of a small synthetic GGUF (no weights but token_embd and the first norm), or its error.
std::string config_error(const std::string& arch, const std::function<void(test::GgufWriter&)>& edit,
                         ModelConfig* out = nullptr, uint32_t blocks = 1) {
  test::GgufWriter w;
  if (!arch.empty()) w.add_string("general.architecture", arch);
  const std::string p = arch + ".";
  w.add_u32(p + "block_count", blocks);
  w.add_u32(p + "embedding_length", 64);
  w.add_u32(p + "feed_forward_length", 128);
  w.add_u32(p + "attention.head_count", 2);
  w.add_f32(p + "attention.layer_norm_rms_epsilon", 1e-5f);
  edit(w);
  w.add_tensor("token_embd.weight", 0, {64, 10}, std::vector<uint8_t>(64 * 10 * 4));
  w.add_tensor("blk.0.attn_norm.weight", 0, {64}, std::vector<uint8_t>(64 * 4));
  const auto b = w.bytes();
  try {
    const ModelConfig c = gguf_model_config(GgufFile::parse(b.data(), b.size(), "c.gguf"));
    if (out) *out = c;
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(GgufModel, ConfigFromMetadata) {
  ModelConfig c;
  ASSERT_EQ(config_error("bitnet-b1.58", [](auto&) {}, &c), "(no error)");
  EXPECT_EQ(c.arch, Arch::kBitNet);
  EXPECT_EQ(c.hidden_act, Activation::kRelu2);  // the bitnet.cpp models' activation
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.vocab_size, 10);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_TRUE(c.tie_word_embeddings && c.sub_norms && c.bitnet_quant);
  ASSERT_EQ(config_error("bitnet", [](auto&) {}, &c), "(no error)");
  EXPECT_EQ(c.hidden_act, Activation::kSilu);  // llama.cpp's bitnet graph default
  ASSERT_EQ(config_error("bitnet", [](auto& w) { w.add_string("bitnet.hidden_activation", "relu2"); }, &c), "(no error)");
  EXPECT_EQ(c.hidden_act, Activation::kRelu2);
  ASSERT_EQ(config_error("qwen2", [](auto& w) {
              w.add_i32s("qwen2.attention.head_count_kv", {1});
              w.add_f32("qwen2.rope.freq_base", 1e6f);
              w.add_u32("tokenizer.ggml.eos_token_id", 3);
              w.add_u32("tokenizer.ggml.eot_token_id", 4);
            }, &c),
            "(no error)");
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{3, 4}));
  EXPECT_FALSE(c.bitnet_quant);
}

TEST(GgufModel, ConfigErrorsNameTheKey) {
  EXPECT_EQ(config_error("", [](auto&) {}), "c.gguf: metadata 'general.architecture' is missing");
  EXPECT_EQ(config_error("gpt2", [](auto&) {}),
            "c.gguf: general.architecture 'gpt2' is not supported (supported: bitnet-b1.58, bitnet-25, bitnet, llama, "
            "qwen2, qwen3)");
  EXPECT_EQ(config_error("llama", [](auto& w) { w.add_u32("llama.context_length", 0); }),
            "c.gguf: metadata 'llama.context_length' is 0, expected 1 to 2^30");
  EXPECT_EQ(config_error("llama", [](auto& w) { w.add_i32s("llama.attention.head_count_kv", {2, 1}); }),
            "c.gguf: metadata 'llama.attention.head_count_kv' differs between layers; tritium needs one value for every "
            "layer");
  EXPECT_EQ(config_error("llama", [](auto& w) { w.add_string("llama.rope.scaling.type", "yarn"); }),
            "c.gguf: RoPE scaling 'yarn' with factor 1 is not supported (only none, or linear with factor 1)");
  EXPECT_EQ(config_error("llama", [](auto& w) { w.add_u32("llama.rope.dimension_count", 16); }),
            "c.gguf: llama.rope.dimension_count 16 is not the head size 32 (partial RoPE is not supported)");
  EXPECT_EQ(config_error("llama", [](auto& w) { w.add_string("llama.hidden_activation", "gelu"); }),
            "c.gguf: llama.hidden_activation 'gelu' is not supported (supported: relu2, silu)");
  EXPECT_EQ(config_error("llama", [](auto& w) { w.add_u32("llama.vocab_size", 11); }),
            "c.gguf: llama.vocab_size 11 differs from the 10 rows of token_embd.weight");
  EXPECT_EQ(config_error("llama", [](auto& w) { w.add_u32("tokenizer.ggml.bos_token_id", 10); }),
            "c.gguf: metadata 'tokenizer.ggml.bos_token_id' is 10, outside the vocabulary [0, 10)");
  EXPECT_EQ(config_error("llama", [](auto& w) { w.add_u32("llama.attention.key_length", 1u << 30); }),
            "c.gguf: 2 heads of size 1073741824 are more than 2^30 values");
  EXPECT_EQ(config_error("llama", [](auto& w) { w.add_tensor("rope_freqs.weight", 0, {16}, std::vector<uint8_t>(64)); }),
            "c.gguf: tensor 'rope_freqs.weight' (RoPE frequency factors, as Llama 3.1's scaling) is not supported");
  // A block count the tensors cannot back: an error before anything is sized by it.
  EXPECT_EQ(config_error("llama", [](auto&) {}, nullptr, 1000000),
            "c.gguf: llama.block_count is 1000000, but tensor 'blk.999999.attn_norm.weight' is missing");
}

namespace {

// TQ2_0 bytes of ternary w (n a multiple of 256) with block scale d(b) for block b.
std::vector<uint8_t> encode_tq2_0(const std::vector<int8_t>& w, const std::function<float(size_t)>& d) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < w.size() / 256; ++b) {
    std::vector<uint8_t> blk(66, 0);
    for (int i = 0; i < 256; ++i) {
      const int c = i / 128, g = i % 128 / 32, p = i % 32;
      blk[32 * c + p] |= static_cast<uint8_t>((w[b * 256 + i] + 1) << (2 * g));
    }
    const uint16_t h = f32_to_f16(d(b));
    std::memcpy(&blk[64], &h, 2);
    out.insert(out.end(), blk.begin(), blk.end());
  }
  return out;
}

}  // namespace

// TQ blocks with different scales (a TQ2_0 file of a non-BitNet-trained tensor) become per-group scales: the fused
// q|k|v layer then computes x_q / s_x . (t x d) with each 128-column group of a row scaled by its block's d.
TEST(GgufModel, MixedTqBlockScalesBecomeGroupScales) {
  test::OneThread one;
  const int64_t H = 256, V = 16;
  test::GgufWriter w;
  w.add_string("general.architecture", "bitnet-b1.58");
  for (const auto& [k, v] : {std::pair{"block_count", 1}, std::pair{"embedding_length", 256},
                             std::pair{"feed_forward_length", 256}, std::pair{"attention.head_count", 4}})
    w.add_u32(std::string("bitnet-b1.58.") + k, static_cast<uint32_t>(v));
  w.add_f32("bitnet-b1.58.attention.layer_norm_rms_epsilon", 1e-5f);
  auto f32 = [](int64_t n, float v) {
    std::vector<uint8_t> b(static_cast<size_t>(n) * 4);
    for (int64_t i = 0; i < n; ++i) std::memcpy(&b[static_cast<size_t>(i) * 4], &v, 4);
    return b;
  };
  w.add_tensor("token_embd.weight", 0, {H, V}, f32(H * V, 0.01f));
  w.add_tensor("output_norm.weight", 0, {H}, f32(H, 1.0f));
  for (const char* n : {"attn_norm", "ffn_norm", "attn_sub_norm", "ffn_sub_norm"})
    w.add_tensor(fmt::format("blk.0.{}.weight", n), 0, {H}, f32(H, 1.0f));
  std::map<std::string, std::vector<int8_t>> values;
  uint32_t seed = 1;
  for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
    values[n] = test::random_ternary(H, H, 0.3, seed++);
    // attn_k: a scale per block (two blocks per row of 256), the rest one scale.
    const bool mixed = std::string(n) == "attn_k";
    w.add_tensor(fmt::format("blk.0.{}.weight", n), 35, {H, H},
                 encode_tq2_0(values[n], [&](size_t b) { return mixed ? 0.25f * static_cast<float>(b % 5 + 1) : 0.5f; }));
  }
  w.add_tensor("blk.0.attn_output.scale", 0, {1}, f32(1, 2.0f));  // multiplies attn_output's block scale 0.5
  test::TempDir d;
  test::write_bytes(d.file("mixed.gguf"), w.bytes());
  auto m = load_transformer(d.file("mixed.gguf"), i2());
  const auto* qkv = dynamic_cast<const TernaryLinear*>(m->layers()[0].qkv.get());
  const auto* o = dynamic_cast<const TernaryLinear*>(m->layers()[0].o.get());
  ASSERT_TRUE(qkv && o);
  EXPECT_EQ(qkv->group_scales().size(), static_cast<size_t>(3 * H * 2));
  ASSERT_EQ(o->segments().size(), 1u);
  EXPECT_EQ(o->segments()[0].scale, 1.0f);
  // A tensor the model does not use is refused, not dropped.
  w.add_tensor("blk.0.attn_q_norm.weight", 0, {64}, f32(64, 1.0f));
  test::write_bytes(d.file("extra.gguf"), w.bytes());
  try {
    load_transformer(d.file("extra.gguf"), i2());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'blk.0.attn_q_norm.weight' is not part of the bitnet-b1.58 model "
                                         "tritium builds (1 such tensors"),
              std::string::npos)
        << e.what();
  }
  // Reference: per-token absmax int8 activations against the dequantized weights, in double.
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  std::vector<float> x(static_cast<size_t>(2 * H));
  for (auto& v : x) v = nd(rng);
  std::vector<float> y(static_cast<size_t>(2 * 3 * H));
  qkv->forward(x.data(), 2, y.data());
  for (int64_t r = 0; r < 2; ++r) {
    float amax = 0;
    for (int64_t k = 0; k < H; ++k) amax = std::max(amax, std::fabs(x[r * H + k]));
    const float s = 127.0f / amax;
    for (int64_t n = 0; n < 3 * H; ++n) {
      const char* part = n < H ? "attn_q" : n < 2 * H ? "attn_k" : "attn_v";
      const int64_t row = n % H;
      double acc = 0;
      for (int64_t k = 0; k < H; ++k) {
        const size_t block = static_cast<size_t>(row * H + k) / 256;
        const float dk = n >= H && n < 2 * H ? 0.25f * static_cast<float>(block % 5 + 1) : 0.5f;
        const double xq = std::clamp(std::nearbyint(x[r * H + k] * s), -128.0f, 127.0f);
        acc += xq * values[part][static_cast<size_t>(row * H + k)] * dk;
      }
      EXPECT_NEAR(y[r * 3 * H + n], acc / s, 1e-4 * (1 + std::fabs(acc / s))) << "row " << r << " output " << n;
    }
  }
}
