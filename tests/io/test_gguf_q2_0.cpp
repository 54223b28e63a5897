// GGUF Q2_0 (ggml type 42): both block layouts told apart by the bytes a tensor spans, every misfit an error, and
// the decode checked against block bytes written out by hand from the layout (io/gguf.h, formats/gguf_quants.h).
#include <gtest/gtest.h>

#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "formats/gguf_quants.h"
#include "gguf_test_util.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"

using namespace tritium;
using test::GgufWriter;

namespace {

constexpr uint32_t kQ2 = 42;

// Q2_0 data of n weights in `block`-weight blocks, every block with scale d and codes cycling 0, 1, 2.
std::vector<uint8_t> q2_bytes(int64_t n, int64_t block, float d = 0.5f) {
  std::vector<int8_t> q(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) q[static_cast<size_t>(i)] = static_cast<int8_t>(i % 3 - 1);
  std::vector<uint16_t> ds(static_cast<size_t>(n / block), f32_to_f16(d));
  std::vector<uint8_t> out(static_cast<size_t>(n / block * (2 + block / 4)));
  encode_q2_0(q.data(), ds.data(), n, block, out.data());
  return out;
}

std::string parse_error(const std::vector<uint8_t>& b) {
  try {
    GgufFile::parse(b.data(), b.size(), "q2.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(GgufQ2_0, DecodeFollowsTheBlockLayout) {
  // One 64-weight block written by hand: d = 0.5 (fp16 0x3800), then 16 code bytes. Byte 0 = 0b10'01'00'10:
  // weights 0..3 have codes 2, 0, 1, 2 -> +d, -d, 0, +d. Byte 1 = 0b11'00'00'00: weight 7 has code 3 -> +2d.
  std::vector<uint8_t> blk(18, 0x55);  // 0x55: codes 1 (zero) everywhere else
  blk[0] = 0x00;
  blk[1] = 0x38;
  blk[2] = 0b10010010;
  blk[3] = 0b11010101;
  std::vector<float> w(64);
  dequantize_q2_0(blk.data(), 64, 64, w.data());
  EXPECT_EQ(w[0], 0.5f);
  EXPECT_EQ(w[1], -0.5f);
  EXPECT_EQ(w[2], 0.0f);
  EXPECT_EQ(w[3], 0.5f);
  EXPECT_EQ(w[7], 1.0f);
  for (int j : {4, 5, 6, 8, 63}) EXPECT_EQ(w[j], 0.0f) << j;
  std::vector<int8_t> v(64);
  float d = 0;
  decode_q2_0(blk.data(), 64, 64, v.data(), &d);
  EXPECT_EQ(d, 0.5f);
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[1], -1);
  EXPECT_EQ(v[7], 2);
  // The same codes in a 128-weight block: the scale first, then 32 code bytes.
  std::vector<uint8_t> b128(34, 0x55);
  b128[0] = 0x00;
  b128[1] = 0x3c;  // 1.0
  b128[2 + 31] = 0b00010101;  // weight 127 has code 0 -> -1
  std::vector<float> w128(128);
  dequantize_q2_0(b128.data(), 128, 128, w128.data());
  EXPECT_EQ(w128[127], -1.0f);
  EXPECT_EQ(w128[126], 0.0f);
}

TEST(GgufQ2_0, EncodeRoundTrips) {
  for (int64_t block : {64, 128}) {
    const std::vector<uint8_t> b = q2_bytes(512, block, 0.25f);
    std::vector<float> w(512);
    dequantize_q2_0(b.data(), 512, block, w.data());
    for (int64_t i = 0; i < 512; ++i) EXPECT_EQ(w[static_cast<size_t>(i)], 0.25f * static_cast<float>(i % 3 - 1)) << i;
  }
}

TEST(GgufQ2_0, LayoutIsToldApartBySize) {
  for (int64_t block : {64, 128}) {
    for (bool last : {true, false}) {
      GgufWriter w;
      w.add_tensor("big.weight", kQ2, {4096, 4}, q2_bytes(4096 * 4, block));
      if (!last) w.add_tensor("after.weight", 0, {4}, std::vector<uint8_t>(16, 0));
      const auto bytes = w.bytes();
      const GgufFile f = GgufFile::parse(bytes.data(), bytes.size(), "q2.gguf");
      const GgufTensorInfo& t = f.tensor("big.weight");
      EXPECT_EQ(t.block, block);
      EXPECT_EQ(t.block_bytes, 2 + block / 4);
      EXPECT_EQ(t.nbytes, static_cast<uint64_t>(4096 * 4 / block * (2 + block / 4)));
      const std::vector<float> v = gguf_tensor_to_f32(t, "q2.gguf");
      for (int64_t i = 0; i < 4096 * 4; i += 777) EXPECT_EQ(v[static_cast<size_t>(i)], 0.5f * static_cast<float>(i % 3 - 1));
    }
  }
}

TEST(GgufQ2_0, SmallTensorsTakeTheFilesLayout) {
  // [128, 2] needs 72 bytes as 64-weight blocks and 68 as 128-weight ones: both round up to 96. A large tensor
  // in the same file decides.
  for (int64_t block : {64, 128}) {
    GgufWriter w;
    w.add_tensor("small.weight", kQ2, {128, 2}, q2_bytes(256, block));
    w.add_tensor("big.weight", kQ2, {4096, 2}, q2_bytes(8192, block));
    const auto bytes = w.bytes();
    const GgufFile f = GgufFile::parse(bytes.data(), bytes.size(), "q2.gguf");
    EXPECT_EQ(f.tensor("small.weight").block, block);
    EXPECT_EQ(f.tensor("big.weight").block, block);
  }
  GgufWriter alone;
  alone.add_tensor("small.weight", kQ2, {128, 2}, q2_bytes(256, 128));
  alone.add_tensor("after.weight", 0, {4}, std::vector<uint8_t>(16, 0));
  EXPECT_NE(parse_error(alone.bytes()).find("fits both Q2_0 layouts"), std::string::npos) << parse_error(alone.bytes());
}

TEST(GgufQ2_0, SizesThatFitNeitherLayoutAreErrors) {
  // A tensor followed by another whose offset leaves room for neither layout.
  GgufWriter w;
  w.add_tensor("big.weight", kQ2, {4096, 4}, std::vector<uint8_t>(4096 * 4 / 128 * 35, 0x55));
  w.add_tensor("after.weight", 0, {4}, std::vector<uint8_t>(16, 0));
  const std::string e = parse_error(w.bytes());
  EXPECT_NE(e.find("tensor 'big.weight' (Q2_0, [4096, 4]) spans"), std::string::npos) << e;
  EXPECT_NE(e.find("fits neither Q2_0 layout"), std::string::npos) << e;
  // ne[0] that is not a multiple of 64.
  GgufWriter odd;
  odd.add_tensor("odd.weight", kQ2, {96, 2}, std::vector<uint8_t>(64, 0x55));
  EXPECT_NE(parse_error(odd.bytes()).find("not a multiple of the block size 64"), std::string::npos);
}

TEST(GgufQ2_0, TruncatedBlockIsAnError) {
  for (int64_t block : {64, 128}) {
    GgufWriter w;
    w.add_tensor("big.weight", kQ2, {4096, 4}, q2_bytes(4096 * 4, block));
    auto bytes = w.bytes();
    bytes.resize(bytes.size() - 5);  // the last block loses its last 5 bytes
    const std::string e = parse_error(bytes);
    EXPECT_NE(e.find("fits neither Q2_0 layout"), std::string::npos) << e;
  }
}

TEST(GgufQ2_0, FileWriterOutputReadsBack) {
  test::TempDir dir;
  GgufFileWriter w;
  w.add_string("general.architecture", "test");
  w.add_u32("n", 7);
  const auto data = q2_bytes(4096 * 3, 128, 0.125f);
  w.add_tensor("t.weight", kQ2, {4096, 3}, data.size(), [&](uint8_t* dst) { std::memcpy(dst, data.data(), data.size()); });
  w.add_tensor("n.weight", 0, {5}, 20, [](uint8_t* dst) { std::memset(dst, 0, 20); });
  const std::string path = dir.file("w.gguf");
  w.write(path);
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.get_string("general.architecture"), "test");
  EXPECT_EQ(f.get_uint("n"), 7u);
  EXPECT_EQ(f.tensor("t.weight").block, 128);
  EXPECT_EQ(0, std::memcmp(f.tensor("t.weight").data, data.data(), data.size()));
  EXPECT_EQ(f.tensor("n.weight").nbytes, 20u);
}
