// tritium model files (`tritium convert`): every ternary format and every quantization method round-trips with
// identical logits, greedy text and perplexity; ternary buffers are used in place from the mapping; lying
// metadata gives a clear tritium::Error; `inspect` figures; the q4 head kernel against its reference.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.h"
#include "eval/perplexity.h"
#include "io/safetensors.h"
#include "model/tritium_model.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/ops.h"
#include "model/inspect.h"
#include "model/loader.h"
#include "kernels/cpu/q4_gemm.h"
#include "kv/block_allocator.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

using namespace tritium;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("tritium_conv_" + std::to_string(::getpid()) + "_" + tag);
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string str() const { return path.string(); }
};

// Logits of every position of `ids` (one prefill on the CPU).
std::vector<float> all_logits(const Transformer& m, const std::vector<int32_t>& ids) {
  CpuBackend be(m);
  return test::prompt_logits(be, ids);
}

// Greedy continuation (prefill, then one token per step).
std::vector<int32_t> greedy(const Transformer& m, const std::vector<int32_t>& ids, int n) {
  CpuBackend be(m);
  return test::greedy_ids(be, ids, n);
}

std::vector<int32_t> sample_tokens(const std::string& model_dir, const std::string& text) {
  auto tok = Tokenizer::from_file(model_dir + "/tokenizer.json");
  return tok->encode(text, false);
}

const char* kText =
    "It was a bright cold day in April, and the clocks were striking thirteen. The hall smelt of boiled cabbage "
    "and old rag mats. At one end of it a coloured poster, too large for indoor display, had been tacked to the "
    "wall. It depicted simply an enormous face, more than a metre wide: the face of a man of about forty-five, "
    "with a heavy black moustache and ruggedly handsome features. Sherlock Holmes took his bottle from the corner "
    "of the mantelpiece and his hypodermic syringe from its neat morocco case. With his long, white, nervous "
    "fingers he adjusted the delicate needle, and rolled back his left shirt-cuff.";

double small_ppl(const Transformer& m, const std::vector<int32_t>& toks) {
  PerplexityOptions po;
  po.n_ctx = 48;
  po.max_chunks = 2;
  po.bos_id = m.config().bos_token_id.value_or(0);
  return compute_perplexity(*test::cpu_backend(borrow(m)), toks, po).ppl;
}

// Whether address p lies in a mapping of `file` (per /proc/self/maps).
bool address_in_mapping_of(const void* p, const std::string& file) {
  std::ifstream in("/proc/self/maps");
  std::string line;
  const auto a = reinterpret_cast<uintptr_t>(p);
  const std::string canon = fs::weakly_canonical(file).string();
  while (std::getline(in, line)) {
    if (line.size() < canon.size() || line.compare(line.size() - canon.size(), canon.size(), canon) != 0) continue;
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi) return true;
  }
  return false;
}

}  // namespace

TEST(TritiumModel, TinyBitnetEveryFormatSameLogitsGreedyAndPerplexity) {
  const std::string src = test::bundled_model();
  const std::vector<int32_t> toks = sample_tokens(src, kText);
  ASSERT_GT(toks.size(), 100u);
  const std::vector<int32_t> prompt(toks.begin(), toks.begin() + 12);
  for (TernaryFormat f : {TernaryFormat::kInt8, TernaryFormat::kI2, TernaryFormat::kTQ1, TernaryFormat::kBitcos}) {
    SCOPED_TRACE(std::string(ternary_format_name(f)));
    LoadOptions lo;
    lo.ternary_format = f;
    auto ref = load_transformer(src, lo);
    TempDir out(std::string(ternary_format_name(f)));
    write_tritium_model(*ref, src, out.str(), {src, std::string(ternary_format_name(f)), "", "f32"});
    for (const char* file : {"config.json", "tokenizer.json", "generation_config.json", "chat_template.jinja"})
      EXPECT_TRUE(fs::exists(out.path / file)) << file;
    auto conv = load_transformer(out.str());  // default options: the stored format, no repacking
    EXPECT_EQ(conv->layers()[0].qkv->format_name(), "ternary-" + std::string(ternary_format_name(f)));
    if (f != TernaryFormat::kInt8) {
      const auto& t = dynamic_cast<const TernaryLinear&>(*conv->layers()[3].gate_up);
      EXPECT_TRUE(address_in_mapping_of(t.packed().buffers()[0].bytes.data(), (out.path / "model.safetensors").string()))
          << "packed weights should be used in place from the mapped file";
    }
    const auto la = all_logits(*ref, toks), lb = all_logits(*conv, toks);
    ASSERT_EQ(la.size(), lb.size());
    EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * 4)) << "logits differ";
    const auto ga = greedy(*ref, prompt, 16), gb = greedy(*conv, prompt, 16);
    EXPECT_EQ(ga, gb);
    const double pa = small_ppl(*ref, toks), pb = small_ppl(*conv, toks);
    EXPECT_EQ(pa, pb);
    EXPECT_GT(pa, 1.0);
    EXPECT_LT(pa, 1000.0);
  }
}

TEST(TritiumModel, ExplicitFormatRepacksConvertedModel) {
  const std::string src = test::bundled_model();
  LoadOptions lo;
  lo.ternary_format = TernaryFormat::kBitcos;
  auto ref = load_transformer(src, lo);
  TempDir out("repack");
  write_tritium_model(*ref, src, out.str(), {});
  LoadOptions lo2;
  lo2.ternary_format = TernaryFormat::kTQ1;
  lo2.ternary_format_explicit = true;
  auto conv = load_transformer(out.str(), lo2);
  EXPECT_EQ(conv->layers()[0].o->format_name(), "ternary-tq1");
  const std::vector<int32_t> toks = sample_tokens(src, kText);
  const auto la = all_logits(*ref, toks), lb = all_logits(*conv, toks);
  EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * 4));
}

TEST(TritiumModel, InspectTinyBitnetZeroDensity) {
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass == 0 ? "Hugging Face folder" : "tritium model (bitcos)");
    const std::string src = test::bundled_model();
    TempDir out("inspect");
    std::string dir = src;
    if (pass == 1) {
      LoadOptions lo;
      lo.ternary_format = TernaryFormat::kBitcos;
      write_tritium_model(*load_transformer(src, lo), src, out.str(), {});
      dir = out.str();
    }
    auto m = load_transformer(dir);
    const ModelInspection r = inspect_model(*m);
    EXPECT_EQ(r.ternary_weights, 6291456u);
    EXPECT_EQ(r.ternary_zeros, 2241007u);
    EXPECT_NEAR(r.summary.zero_density, 0.3562, 5e-5);
    EXPECT_DOUBLE_EQ(r.summary.bitcos_symbols, 2.0 - r.summary.zero_density);
    int ternary = 0;
    double zmin = 1, zmax = 0;
    for (const auto& t : r.tensors) {
      if (!t.ternary) continue;
      ++ternary;
      zmin = std::min(zmin, t.stats.zero_density);
      zmax = std::max(zmax, t.stats.zero_density);
      EXPECT_DOUBLE_EQ(t.stats.get(TernaryFormat::kBitcos).bits_symbols, 2.0 - t.stats.zero_density);
    }
    EXPECT_EQ(ternary, 56);  // 8 layers x q, k, v, o, gate, up, down
    EXPECT_NEAR(zmin, 0.318, 5e-4);
    EXPECT_NEAR(zmax, 0.395, 5e-4);
    // Table I: BITCOS is smaller than 2-bit packing; at z < 0.375 not smaller than 5-trit packing.
    EXPECT_GT(r.summary.ratio_vs_2bit, 1.2);
    EXPECT_LT(r.summary.ratio_vs_5trit, 1.0);
    EXPECT_EQ(r.tensors.back().name, "lm_head");
  }
}

TEST(TritiumModel, LyingMetadataIsAClearError) {
  const std::string src = test::bundled_model();
  LoadOptions lo;
  lo.ternary_format = TernaryFormat::kI2;
  auto ref = load_transformer(src, lo);
  TempDir out("lie");
  write_tritium_model(*ref, src, out.str(), {});
  const std::string st = (out.path / "model.safetensors").string();
  TempDir pristine("lie_src");
  fs::create_directories(pristine.path);
  fs::copy_file(st, pristine.path / "model.safetensors");
  // Re-writes the file from the pristine copy with the layout JSON edited by `edit` and, optionally, one tensor
  // truncated.
  auto rewrite = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& shrink = "") {
    SafetensorsFile f((pristine.path / "model.safetensors").string());
    nlohmann::json layout = nlohmann::json::parse(f.metadata()[kTritiumLayoutKey].get<std::string>());
    edit(layout);
    std::vector<TensorToWrite> ts;
    for (const auto& [name, t] : f.tensors()) {
      std::vector<int64_t> shape = t.shape;
      size_t nb = t.nbytes;
      if (name == shrink) {
        shape[0] -= 8;
        nb -= 8;
      }
      ts.push_back({name, t.dtype, shape, t.data, nb});
    }
    write_safetensors(st, ts, {{"tritium.version", "1"}, {kTritiumLayoutKey, layout.dump()}});
  };
  auto expect_error = [&](const std::string& needle) {
    try {
      load_transformer(out.str());
      ADD_FAILURE() << "expected tritium::Error containing '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos) << e.what();
    }
  };
  rewrite([](nlohmann::json& j) { j["linears"]["model.layers.2.o"]["format"] = "q3x"; });
  expect_error("unknown ternary format 'q3x'");
  rewrite([](nlohmann::json& j) { j["linears"]["model.layers.2.o"]["format"] = "tq1"; });  // i2 bytes read as tq1
  expect_error("model.layers.2.o");
  rewrite([](nlohmann::json& j) { j["linears"]["model.layers.2.o"]["format"] = "i2"; }, "model.layers.1.down.codes");
  expect_error("model.layers.1.down");
  rewrite([](nlohmann::json& j) { j["linears"]["model.layers.0.qkv"]["kind"] = "sparse"; });
  expect_error("unknown kind 'sparse'");
  rewrite([](nlohmann::json& j) { j["linears"]["model.layers.0.gate_up"]["rows"] = 7; });
  expect_error("model.layers.0.gate_up");
  rewrite([](nlohmann::json& j) { j["linears"]["model.layers.0.qkv"]["segment_rows"] = {256, 128, 64}; });
  expect_error("model.layers.0.qkv");
  rewrite([](nlohmann::json& j) { j.erase("linears"); });
  expect_error("linears");
  // Values of the wrong JSON type (found by fuzz_tritium_model): a clear error, not a json exception.
  rewrite([](nlohmann::json& j) { j["version"] = "1"; });
  expect_error("unsupported layout version \"1\"");
  rewrite([](nlohmann::json& j) { j["linears"]["lm_head"]["kind"] = 3; });
  expect_error("lm_head");
  rewrite([](nlohmann::json& j) { j["linears"]["model.layers.1.o"]["rows"] = "256"; });
  expect_error("model.layers.1.o");
}

TEST(TritiumModel, Qwen2EveryMethodRoundTripsGeneratesAndScores) {
  REQUIRE_SHARED_DATA(shared);
  const std::string src = shared + "/models/tiny-qwen2";
  const std::vector<int32_t> toks = sample_tokens(src, kText);
  const std::vector<int32_t> prompt(toks.begin(), toks.begin() + 10);
  auto base = load_transformer(src);
  const double base_ppl = small_ppl(*base, toks);
  for (const std::string& q : quant_method_names()) {
    SCOPED_TRACE(q);
    LoadOptions lo;
    lo.quant = q;
    lo.ternary_format = TernaryFormat::kI2;
    auto ref = load_transformer(src, lo);
    TempDir out("q_" + q);
    write_tritium_model(*ref, src, out.str(), {src, "", q, "f32"});
    auto conv = load_transformer(out.str());
    EXPECT_EQ(conv->layers()[1].down->format_name(), ref->layers()[1].down->format_name());
    const auto la = all_logits(*ref, toks), lb = all_logits(*conv, toks);
    EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * 4)) << "logits differ after the round trip";
    const auto g = greedy(*conv, prompt, 16);
    EXPECT_EQ(g, greedy(*ref, prompt, 16));
    const double p = small_ppl(*conv, toks);
    EXPECT_EQ(p, small_ppl(*ref, toks));
    EXPECT_TRUE(std::isfinite(p));
    // int8 methods stay near the bf16 model; ternary PTQ of a model trained in 16 bits is much worse.
    if (q.rfind("ternary", 0) != 0) {
      EXPECT_LT(std::fabs(p / base_ppl - 1.0), 0.1) << p << " vs " << base_ppl;
    }
    EXPECT_THROW(load_transformer(out.str(), lo), Error);  // already quantized: --quant is refused
  }
}

TEST(TritiumModel, QuantizedHeadRoundTripsAndStaysClose) {
  const std::string src = test::bundled_model();
  const std::vector<int32_t> toks = sample_tokens(src, kText);
  auto f32 = load_transformer(src);
  const double p32 = small_ppl(*f32, toks);
  for (const std::string head : {"int8", "q6", "q4"}) {
    SCOPED_TRACE(head);
    LoadOptions lo;
    lo.lm_head = head;
    auto ref = load_transformer(src, lo);
    EXPECT_EQ(ref->lm_head().format_name(), head == "int8" ? "vectorwise" : head);
    EXPECT_LT(ref->lm_head().weight_bytes(), f32->lm_head().weight_bytes() / 3);
    TempDir out(std::string("head_") + head);
    write_tritium_model(*ref, src, out.str(), {});
    auto conv = load_transformer(out.str());
    const auto la = all_logits(*ref, toks), lb = all_logits(*conv, toks);
    EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * 4));
    const double p = small_ppl(*ref, toks);
    EXPECT_LT(std::fabs(p / p32 - 1.0), head == "q4" ? 0.05 : head == "q6" ? 0.03 : 0.01) << p << " vs " << p32;
    LoadOptions other;
    other.lm_head = head == "q4" ? "int8" : "q4";
    EXPECT_THROW(load_transformer(out.str(), other), Error);
  }
}

TEST(Q4Rows, KernelMatchesReferenceAndDequantization) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  const int64_t N = 203, K = 320, M = 3;
  std::vector<float> w(static_cast<size_t>(N * K));
  for (auto& v : w) v = nd(rng);
  w[5] = 0.9f;  // an outlier inside one group
  const Q4Rows q = quantize_q4_rows(w.data(), N, K);
  EXPECT_EQ(q.bytes(), static_cast<size_t>(N * K / 2 + N * K / 32 * 2));
  const std::vector<float> d = q.dequantize();
  for (int64_t r = 0; r < N; ++r)
    for (int64_t g = 0; g < K / 32; ++g) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(w[r * K + g * 32 + j]));
      for (int j = 0; j < 32; ++j) {
        const size_t i = static_cast<size_t>(r * K + g * 32 + j);
        ASSERT_LE(std::fabs(d[i] - w[i]), amax / 14.0f * 1.01f + 1e-6f) << r << "," << g * 32 + j;
      }
    }
  std::uniform_int_distribution<int> xd(-128, 127);
  std::vector<int8_t> x(static_cast<size_t>(M * K));
  for (auto& v : x) v = static_cast<int8_t>(xd(rng));
  const float act[3] = {0.01f, 1.0f, 0.5f};
  std::vector<float> y_ref(static_cast<size_t>(M * N)), y(static_cast<size_t>(M * N));
  q4_gemm_ref(q, x.data(), act, M, y_ref.data());
  // The reference against the dequantized weights in double.
  for (int64_t m = 0; m < M; ++m)
    for (int64_t r = 0; r < N; ++r) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += static_cast<double>(d[r * K + k]) * x[m * K + k];
      ASSERT_NEAR(y_ref[m * N + r], act[m] * s, 1e-4 * std::max(1.0, std::fabs(act[m] * s)));
    }
  if (!cpu::kernel_path_supported(cpu::KernelPath::kAvx2)) GTEST_SKIP() << "no AVX2";
  cpu::set_cpu_kernel_path(cpu::KernelPath::kAvx2);
  q4_gemm(q, x.data(), act, M, y.data());
  cpu::reset_cpu_kernel_path();
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], y_ref[i], 1e-5f * std::max(1.0f, std::fabs(y_ref[i]))) << i;
  EXPECT_THROW(quantize_q4_rows(w.data(), N, 100), Error);
}

TEST(CliOutliers, TinyQwen2TableHasARowPerLayer) {
  REQUIRE_SHARED_DATA(shared);
  TempDir plots("plots");
  const auto r = test::run_cli({"outliers", "-m", shared + "/models/tiny-qwen2", "-f",
                                shared + "/data/books-eval/2852-0.txt", "--ctx", "128", "--max-tokens", "256", "-t",
                                "1", "--plot", plots.str()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int l = 0; l < 8; ++l)
    for (const char* p : {"qkv", "o", "gate_up", "down"})
      EXPECT_NE(r.out.find("| layers." + std::to_string(l) + "." + p + " |"), std::string::npos) << l << p;
  EXPECT_NE(r.out.find("256 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("suggested alpha:"), std::string::npos);
  EXPECT_NE(r.out.find("outlier feature dimensions"), std::string::npos);
  for (const char* png : {"colmax_hist.png", "colmax_sorted.png", "outliers_per_layer.png"}) {
    ASSERT_TRUE(fs::exists(plots.path / png)) << png;
    std::ifstream in(plots.path / png, std::ios::binary);
    char sig[8] = {};
    in.read(sig, 8);
    EXPECT_EQ(std::string(sig + 1, 3), "PNG") << png;
  }
}

TEST(CliConvert, ConvertInspectAndRun) {
  TempDir out("cli");
  const auto c = test::run_cli({"convert", "-o", out.str(), "--weights", "bitcos", "--lm-head", "q4", "-t", "1"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.err.find("8/8"), std::string::npos) << "progress bar: " << c.err;
  const auto i = test::run_cli({"inspect", out.str(), "--json"});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  const auto j = nlohmann::json::parse(i.out);
  EXPECT_EQ(j["container"], "tritium");
  EXPECT_EQ(j["ternary"]["zeros"], 2241007);
  EXPECT_EQ(j["ternary"]["weights"], 6291456);
  const auto t = test::run_cli({"inspect", out.str()});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("| 35.62 | 1.6438 |"), std::string::npos) << t.out;
  const auto bad = test::run_cli({"convert", "-o", out.str() + "/x", "--quant", "int8-absmax"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("already ternary"), std::string::npos) << bad.err;
}

// Every SIMD path's per-token quantization equals the scalar loop's codes and scales bit for bit: rounding ties,
// a tail shorter than a vector, a row dominated by one large value, an all-zero row.
TEST(QuantizeRows, SimdPathsMatchScalarBitForBit) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t M = 11, K = 2563;  // a tail that is not a multiple of 8, 16 or 32
  std::vector<float> x(static_cast<size_t>(M * K));
  for (auto& v : x) v = nd(rng);
  for (int64_t k = 0; k < K; k += 7) x[k] = 127.0f * 0.5f * static_cast<float>(k % 5) / 127.0f;  // ties
  x[3 * K + 5] = 0;  // a row with a large value
  x[4 * K + 9] = 1e6f;
  for (int64_t k = 0; k < K; ++k) x[5 * K + k] = 0.0f;  // all zero row
  std::vector<int8_t> qa(x.size());
  std::vector<float> sa(M);
  cpu::set_cpu_kernel_path(cpu::KernelPath::kRef);
  cpu::quantize_rows_absmax_i8(x.data(), M, K, qa.data(), sa.data());
  EXPECT_EQ(qa[4 * K + 9], 127);
  int paths = 0;
  for (auto path : {cpu::KernelPath::kAvx2, cpu::KernelPath::kAvx512}) {
    if (!cpu::kernel_path_supported(path)) continue;
    ++paths;
    std::vector<int8_t> qb(x.size());
    std::vector<float> sb(M);
    cpu::set_cpu_kernel_path(path);
    cpu::quantize_rows_absmax_i8(x.data(), M, K, qb.data(), sb.data());
    EXPECT_EQ(qa, qb) << cpu::kernel_path_name(path);
    EXPECT_EQ(0, std::memcmp(sa.data(), sb.data(), M * 4)) << cpu::kernel_path_name(path);
  }
  cpu::reset_cpu_kernel_path();
  if (paths == 0) GTEST_SKIP() << "no SIMD path on this CPU";
}
