// The GGUF tensor decoders: bit-exact against the tiny-bitnet safetensors weights (the fixtures were written by
// upstream code from them), and against scalar references written here from the upstream algorithms (quants.py /
// ggml-quants.c loops, bitnet.cpp's quantize_i2_s) on random blocks, including TQ1_0, which has no fixture.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/dtype.h"
#include "core/error.h"
#include "formats/gguf_quants.h"
#include "gguf_test_util.h"
#include "io/safetensors.h"
#include "model/source_safetensors.h"

using namespace tritium;

namespace {

GgufTensorInfo info(uint32_t type, std::vector<int64_t> ne, const std::vector<uint8_t>& bytes, std::string name = "t") {
  GgufTensorInfo t;
  t.name = std::move(name);
  t.type = type;
  t.ne = std::move(ne);
  t.data = bytes.data();
  t.nbytes = bytes.size();
  return t;
}

void put_f16(std::vector<uint8_t>& b, size_t at, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(&b[at], &h, 2);
}

// ---- references, in the upstream loops' output order (`*y++`) ---------------------------------------------------

// ggml-quants.c dequantize_row_tq2_0: for j in 0, 32 (bytes); for l in 0..3; for m in 0..31: (qs[j+m] >> 2l) & 3.
std::vector<float> ref_tq2_0(const std::vector<uint8_t>& b, int64_t n) {
  std::vector<float> y;
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* x = &b[static_cast<size_t>(i) * 66];
    uint16_t h;
    std::memcpy(&h, x + 64, 2);
    const float d = f16_to_f32(h);
    for (int j = 0; j < 64; j += 32)
      for (int l = 0; l < 4; ++l)
        for (int m = 0; m < 32; ++m) y.push_back(static_cast<float>(((x[j + m] >> (l * 2)) & 3) - 1) * d);
  }
  return y;
}

// ggml-quants.c dequantize_row_tq1_0: qs[0..32) five digits each, qs[32..48) five digits each, qh[0..4) four digits.
std::vector<float> ref_tq1_0(const std::vector<uint8_t>& b, int64_t n) {
  const uint8_t pow3[6] = {1, 3, 9, 27, 81, 243};
  std::vector<float> y;
  auto emit = [&](uint8_t byte, int k, float d) {
    const uint8_t q = static_cast<uint8_t>(byte * pow3[k]);
    const int16_t xi = static_cast<int16_t>((static_cast<uint16_t>(q) * 3) >> 8);
    y.push_back(static_cast<float>(xi - 1) * d);
  };
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* x = &b[static_cast<size_t>(i) * 54];
    uint16_t h;
    std::memcpy(&h, x + 52, 2);
    const float d = f16_to_f32(h);
    for (int k = 0; k < 5; ++k)
      for (int m = 0; m < 32; ++m) emit(x[m], k, d);
    for (int k = 0; k < 5; ++k)
      for (int m = 0; m < 16; ++m) emit(x[32 + m], k, d);
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 4; ++j) emit(x[48 + j], k, d);
  }
  return y;
}

// gguf-py quants.py TQ1_0.quantize_blocks for one block of ternary values w (256) with scale d.
std::vector<uint8_t> encode_tq1_0(const int8_t* w, float d) {
  std::vector<uint8_t> out(54);
  auto pack = [&](int first, int stride, int digits, int bytes, int at) {
    static const int kMul[5] = {81, 27, 9, 3, 1};
    for (int p = 0; p < bytes; ++p) {
      int v = 0;
      for (int k = 0; k < digits; ++k) v += (w[first + stride * k + p] + 1) * kMul[k];
      out[at + p] = static_cast<uint8_t>((v * 256 + 242) / 243);  // ceil(v * 256 / 243)
    }
  };
  pack(0, 32, 5, 32, 0);
  pack(160, 16, 5, 16, 32);
  pack(240, 4, 4, 4, 48);
  put_f16(out, 52, d);
  return out;
}

// bitnet.cpp quantize_i2_s (x86 ACT_PARALLEL): weight j of block b -> byte 32 b + j % 32, shift 6 - 2 (j / 32).
std::vector<uint8_t> encode_i2_s(const std::vector<int8_t>& w, float scale) {
  std::vector<uint8_t> out(w.size() / 4 + 32, 0);
  for (size_t i = 0; i < w.size(); ++i) {
    const size_t b = i / 128, j = i % 128;
    out[32 * b + j % 32] |= static_cast<uint8_t>((w[i] + 1) << (6 - 2 * (j / 32)));
  }
  std::memcpy(&out[w.size() / 4], &scale, 4);
  return out;
}

std::string error_of(auto fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(GgufQuants, MatchTheSafetensorsWeightsBitForBit) {
  REQUIRE_GGUF_FIXTURES(dir);
  auto st = WeightStore::from_file(test::bundled_model() + "/model.safetensors");
  const std::pair<const char*, const char*> proj[] = {
      {"attn_q", "self_attn.q_proj"}, {"attn_k", "self_attn.k_proj"}, {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"}, {"ffn_gate", "mlp.gate_proj"}, {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"}};
  for (const char* file : {"tiny-bitnet-I2_S.gguf", "tiny-bitnet-TQ2_0.gguf", "tiny-bitnet-F16.gguf"}) {
    SCOPED_TRACE(file);
    const GgufFile g = GgufFile::open(dir + "/" + file);
    int checked = 0;
    for (int l = 0; l < 8; ++l)
      for (const auto& [gn, hn] : proj) {
        const GgufTensorInfo& t = g.tensor(fmt::format("blk.{}.{}.weight", l, gn));
        const std::string hf = fmt::format("model.layers.{}.{}", l, hn);
        const TensorView& packed = st->get(hf + ".weight");
        const int64_t in = t.ne[0], out = t.ne[1];
        ASSERT_EQ(packed.shape, (std::vector<int64_t>{out / 4, in}));
        const std::vector<int8_t> want = unpack_bitnet_weight(packed.data, out, in);
        const float scale = tensor_scalar_f32(st->get(hf + ".weight_scale"));
        // Dequantized values, as upstream computes them: exactly ternary x weight_scale.
        const std::vector<float> f = gguf_tensor_to_f32(t, file);
        ASSERT_EQ(f.size(), want.size());
        for (size_t i = 0; i < f.size(); ++i)
          ASSERT_EQ(f[i], static_cast<float>(want[i]) * scale) << t.name << " weight " << i;
        if (gguf_type_is_ternary(t.type)) {
          const GgufTernary r = gguf_tensor_to_ternary(t, file);
          ASSERT_EQ(r.values, want) << t.name;
          for (float s : r.scales) ASSERT_TRUE(s == 0.0f || s == scale) << t.name << " scale " << s << " vs " << scale;
          EXPECT_EQ(r.block, t.type == static_cast<uint32_t>(GgmlType::kI2_S) ? in * out : 256);
        }
        ++checked;
      }
    EXPECT_EQ(checked, 56);
    // Norms are F32 copies of the bf16 weights.
    EXPECT_EQ(gguf_tensor_to_f32(g.tensor("blk.3.attn_sub_norm.weight"), file),
              tensor_to_f32(st->get("model.layers.3.self_attn.attn_sub_norm.weight")));
  }
}

TEST(GgufQuants, Q8_0MatchesTheReferenceAndTheFixture) {
  std::mt19937 rng(7);
  std::vector<uint8_t> b(34 * 5);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  for (int blk = 0; blk < 5; ++blk) put_f16(b, 34 * blk, 0.001f * static_cast<float>(blk + 1) * (blk % 2 ? -1 : 1));
  const auto f = gguf_tensor_to_f32(info(8, {160}, b), "x");
  for (int i = 0; i < 160; ++i) {
    uint16_t h;
    std::memcpy(&h, &b[34 * (i / 32)], 2);
    EXPECT_EQ(f[i], static_cast<float>(static_cast<int8_t>(b[34 * (i / 32) + 2 + i % 32])) * f16_to_f32(h));
  }
  REQUIRE_GGUF_FIXTURES(dir);
  REQUIRE_SHARED_DATA(s);
  // The Q8_0 qwen2 projections are within the quantizer's rounding of the bf16 weights (half a step d / 2, plus
  // the rounding of d itself to fp16: 127 |d - f16(d)|, as verify-report.json bounds them).
  const GgufFile g = GgufFile::open(dir + "/tiny-qwen2-Q8_0.gguf");
  auto st = WeightStore::from_file(s + "/models/tiny-qwen2/model.safetensors");
  const auto w = gguf_tensor_to_f32(g.tensor("blk.0.attn_q.weight"), "q");
  const auto ref = tensor_to_f32(st->get("model.layers.0.self_attn.q_proj.weight"));
  ASSERT_EQ(w.size(), ref.size());
  double worst = 0;
  for (size_t blk = 0; blk < ref.size() / 32; ++blk) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(ref[blk * 32 + j]));
    const float d = amax / 127.0f, dh = f16_to_f32(f32_to_f16(d));
    for (int j = 0; j < 32; ++j) {
      const double e = std::fabs(w[blk * 32 + j] - ref[blk * 32 + j]);
      EXPECT_LE(e, d / 2 + 127 * std::fabs(d - dh) + 1e-7) << "block " << blk;
      worst = std::max(worst, e);
    }
  }
  std::printf("  qwen2 blk.0.attn_q Q8_0: max |w - bf16| = %.3g\n", worst);
}

TEST(GgufQuants, Tq2_0MatchesTheUpstreamLoop) {
  std::mt19937 rng(11);
  std::vector<uint8_t> b(66 * 3);
  for (auto& x : b) x = static_cast<uint8_t>(rng() % 256);
  for (int blk = 0; blk < 3; ++blk) put_f16(b, 66 * blk + 64, 0.5f + static_cast<float>(blk));
  const GgufTensorInfo t = info(35, {256, 3}, b);
  EXPECT_EQ(gguf_tensor_to_f32(t, "x"), ref_tq2_0(b, 768));  // code 3 included: upstream gives it 2 d
  // Random bytes hold code 3 somewhere: not ternary.
  EXPECT_NE(error_of([&] { gguf_tensor_to_ternary(t, "x.gguf"); }).find("x.gguf: tensor 't' (TQ2_0): weight"),
            std::string::npos);
  // Codes 0..2 only: the ternary decode is the reference divided by d.
  for (int blk = 0; blk < 3; ++blk)
    for (int i = 0; i < 64; ++i) {
      uint8_t v = 0;
      for (int g = 0; g < 4; ++g) v |= static_cast<uint8_t>((rng() % 3) << (2 * g));
      b[66 * blk + i] = v;
    }
  const GgufTernary r = gguf_tensor_to_ternary(t, "x");
  const auto ref = ref_tq2_0(b, 768);
  ASSERT_EQ(r.scales.size(), 3u);
  for (int i = 0; i < 768; ++i) EXPECT_EQ(static_cast<float>(r.values[i]) * r.scales[i / 256], ref[i]) << i;
}

TEST(GgufQuants, Tq1_0RoundTripsThroughTheUpstreamQuantizerAndLoop) {
  std::mt19937 rng(3);
  const int blocks = 4;
  std::vector<int8_t> w = test::random_ternary(1, 256 * blocks, 0.35, rng);
  w[0] = w[1] = -1;  // the extremes of a digit
  w[255] = 1;
  std::vector<uint8_t> b;
  const float d[blocks] = {0.25f, 1.0f, 0.0f, 3.5f};
  for (int blk = 0; blk < blocks; ++blk) {
    const auto e = encode_tq1_0(&w[256 * blk], d[blk]);
    b.insert(b.end(), e.begin(), e.end());
  }
  const GgufTensorInfo t = info(34, {512, 2}, b);
  const auto f = gguf_tensor_to_f32(t, "x");
  EXPECT_EQ(f, ref_tq1_0(b, 1024));
  const GgufTernary r = gguf_tensor_to_ternary(t, "x");
  for (int i = 0; i < 1024; ++i) {
    const int8_t want = d[i / 256] == 0.0f ? 0 : w[i];  // a block with d = 0 multiplies to zeros
    ASSERT_EQ(r.values[i], want) << i;
    EXPECT_EQ(f[i], static_cast<float>(w[i]) * d[i / 256]) << i;
  }
  EXPECT_EQ(r.scales, (std::vector<float>{0.25f, 1.0f, 0.0f, 3.5f}));
  // Every byte value decodes to digits in {0, 1, 2}: the type has no invalid code.
  std::vector<uint8_t> all(54);
  for (int v = 0; v < 256; v += 1) {
    std::fill(all.begin(), all.end() - 2, static_cast<uint8_t>(v));
    put_f16(all, 52, 1.0f);
    for (float x : gguf_tensor_to_f32(info(34, {256}, all), "x")) ASSERT_TRUE(x == -1 || x == 0 || x == 1) << v;
  }
}

TEST(GgufQuants, I2sFollowsBitnetCppsPacking) {
  std::mt19937 rng(5);
  const std::vector<int8_t> w = test::random_ternary(3, 256, 0.4, rng);
  const auto b = encode_i2_s(w, 0.125f);
  const GgufTensorInfo t = info(36, {256, 3}, b);
  const GgufTernary r = gguf_tensor_to_ternary(t, "x");
  EXPECT_EQ(r.values, w);
  EXPECT_EQ(r.scales, std::vector<float>{0.125f});
  EXPECT_EQ(r.block, 768);
  // The README's wording of the same layout: byte 32 b + p holds weights 128 b + p, + 32, + 64, + 96 in bits 7:6,
  // 5:4, 3:2, 1:0.
  for (int byte = 0; byte < 192; ++byte) {
    const int blk = byte / 32, p = byte % 32;
    for (int g = 0; g < 4; ++g) EXPECT_EQ(((b[byte] >> (6 - 2 * g)) & 3) - 1, w[128 * blk + 32 * g + p]);
  }
  auto bad = b;
  bad[5] |= 0xC0;  // code 3 for weight 5
  EXPECT_EQ(error_of([&] { gguf_tensor_to_ternary(info(36, {256, 3}, bad, "blk.0.attn_q.weight"), "m.gguf"); }),
            "m.gguf: tensor 'blk.0.attn_q.weight' (I2_S): weight 5 has the unused 2-bit code 3 (not a ternary value)");
  EXPECT_EQ(gguf_tensor_to_f32(info(36, {256, 3}, bad), "x")[5], 2 * 0.125f);  // bitnet.cpp's (code - 1) * scale
  auto nan = b;
  const float q = NAN;
  std::memcpy(&nan[192], &q, 4);
  EXPECT_NE(error_of([&] { gguf_tensor_to_ternary(info(36, {256, 3}, nan), "m.gguf"); }).find("is not finite"),
            std::string::npos);
  const std::vector<uint8_t> small(16 + 32);
  EXPECT_EQ(error_of([&] { gguf_tensor_to_ternary(info(36, {64}, small), "m.gguf"); }),
            "m.gguf: tensor 't' (I2_S, [64]) has 64 weights, not a multiple of the 128-weight block");
}

TEST(GgufQuants, UnsupportedTypesNameTheTensor) {
  const std::vector<uint8_t> b(144);
  EXPECT_EQ(error_of([&] { gguf_tensor_to_f32(info(12, {256}, b, "blk.1.ffn_up.weight"), "m.gguf"); }),
            "m.gguf: tensor 'blk.1.ffn_up.weight' has type Q4_K, which tritium does not decode (supported: F32, F16, "
            "BF16, Q8_0, TQ1_0, TQ2_0, I2_S, Q2_0)");
  EXPECT_EQ(error_of([&] { gguf_tensor_to_ternary(info(1, {72}, b), "m.gguf"); }),
            "m.gguf: tensor 't' has type F16, not a ternary type (TQ1_0, TQ2_0, I2_S, Q2_0)");
  EXPECT_TRUE(gguf_type_is_supported(30));
  EXPECT_FALSE(gguf_type_is_supported(12));
}

// A tensor with no elements (found by fuzz_gguf: tests/fuzz/gguf/empty_f32_tensor.gguf) converts to an empty
// vector without touching its (absent) data; the same for a safetensors F32 view.
TEST(GgufQuants, EmptyTensorsConvertToNothing) {
  GgufTensorInfo t;
  t.name = "empty";
  t.type = 0;  // F32
  t.ne = {0};
  EXPECT_TRUE(gguf_tensor_to_f32(t, "empty.gguf").empty());
  TensorView v;
  v.dtype = DType::F32;
  v.shape = {0, 4};
  EXPECT_TRUE(tensor_to_f32(v).empty());

  // I2_S keeps its per-tensor scale after the (here absent) packed weights.
  const uint8_t i2s_bytes[32] = {0, 0, 0x80, 0x3f};  // scale 1.0f
  t.type = 36;                                      // I2_S
  t.data = i2s_bytes;
  t.nbytes = sizeof(i2s_bytes);
  EXPECT_TRUE(gguf_tensor_to_f32(t, "empty.gguf").empty());
  const GgufTernary r = gguf_tensor_to_ternary(t, "empty.gguf");
  EXPECT_TRUE(r.values.empty());
  ASSERT_EQ(r.scales.size(), 1u);
  EXPECT_EQ(r.scales[0], 1.0f);
}
