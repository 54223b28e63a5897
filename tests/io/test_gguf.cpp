// The GGUF reader: every value type, tensor sizes and offsets, the upstream fixtures, and damaged files (each a
// tritium::Error naming what is wrong; also run under ASan by scripts/test.sh, so no read past the end goes unseen).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "gguf_test_util.h"
#include "io/gguf.h"

using namespace tritium;
using test::GgufWriter;

namespace {

// A file with one value of every type, nested arrays, and three tensors (F32 [3, 2], Q8_0 [64], I2_S [128, 2]).
GgufWriter sample_writer() {
  GgufWriter w;
  w.add<uint8_t>("u8", GgufType::kUint8, 200);
  w.add<int8_t>("i8", GgufType::kInt8, -100);
  w.add<uint16_t>("u16", GgufType::kUint16, 60000);
  w.add<int16_t>("i16", GgufType::kInt16, -30000);
  w.add_u32("u32", 4000000000u);
  w.add_i32("i32", -2000000000);
  w.add_f32("f32", 0.25f);
  w.add_bool("bool", true);
  w.add_string("str", "héllo");
  w.add<uint64_t>("u64", GgufType::kUint64, 18000000000000000000ull);
  w.add<int64_t>("i64", GgufType::kInt64, -9000000000000000000ll);
  w.add<double>("f64", GgufType::kFloat64, 1e-300);
  w.add_strings("strs", {"a", "", "ccc"});
  w.add_i32s("ints", {1, -2, 3});
  // [[1, 2], [3]] as an array of two arrays of UINT16
  std::vector<uint8_t> nested;
  GgufWriter::put<uint32_t>(nested, static_cast<uint32_t>(GgufType::kArray));
  GgufWriter::put<uint64_t>(nested, 2);
  for (std::vector<uint16_t> inner : {std::vector<uint16_t>{1, 2}, std::vector<uint16_t>{3}}) {
    GgufWriter::put<uint32_t>(nested, static_cast<uint32_t>(GgufType::kUint16));
    GgufWriter::put<uint64_t>(nested, inner.size());
    for (uint16_t x : inner) GgufWriter::put<uint16_t>(nested, x);
  }
  w.add_raw("nested", GgufType::kArray, nested);
  std::vector<uint8_t> f32(24);
  for (int i = 0; i < 6; ++i) {
    const float v = static_cast<float>(i) - 2.5f;
    std::memcpy(&f32[4 * i], &v, 4);
  }
  w.add_tensor("a.weight", 0, {3, 2}, f32);
  w.add_tensor("b.weight", 8, {64}, std::vector<uint8_t>(68, 1));
  w.add_tensor("c.weight", 36, {128, 2}, std::vector<uint8_t>(64 + 32, 0x55));
  return w;
}

std::string parse_error(const std::vector<uint8_t>& b) {
  try {
    GgufFile::parse(b.data(), b.size(), "bad.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_GGUF_ERROR(bytes, ...)                                                     \
  do {                                                                                    \
    const std::string msg = parse_error(bytes);                                           \
    for (const char* needle : {__VA_ARGS__}) EXPECT_NE(msg.find(needle), std::string::npos) << msg; \
  } while (0)

// Byte offset of the first occurrence of `s` in b.
size_t find_bytes(const std::vector<uint8_t>& b, const std::string& s) {
  auto it = std::search(b.begin(), b.end(), s.begin(), s.end());
  return static_cast<size_t>(it - b.begin());
}

template <typename T>
void poke(std::vector<uint8_t>& b, size_t at, T v) {
  std::memcpy(&b[at], &v, sizeof(T));
}

}  // namespace

TEST(Gguf, EveryValueTypeAndTensorLayout) {
  for (uint32_t version : {2u, 3u}) {
    GgufWriter w = sample_writer();
    w.add_u32("general.alignment", 64);
    const auto b = w.bytes(version, 64);
    const GgufFile f = GgufFile::parse(b.data(), b.size(), "sample.gguf");
    EXPECT_EQ(f.version(), version);
    EXPECT_EQ(f.alignment(), 64u);
    EXPECT_EQ(f.metadata().size(), 16u);
    EXPECT_EQ(f.get_uint("u8"), 200u);
    EXPECT_EQ(*f.find("i8")->to_int(), -100);
    EXPECT_EQ(f.get_uint("u16"), 60000u);
    EXPECT_EQ(*f.find("i16")->to_int(), -30000);
    EXPECT_EQ(f.get_uint("u32"), 4000000000u);
    EXPECT_EQ(*f.find("i32")->to_int(), -2000000000);
    EXPECT_EQ(f.get_float("f32"), 0.25);
    EXPECT_TRUE(f.get_bool("bool"));
    EXPECT_EQ(f.get_string("str"), "héllo");
    EXPECT_EQ(f.get_uint("u64"), 18000000000000000000ull);
    EXPECT_FALSE(f.find("u64")->to_int().has_value());
    EXPECT_EQ(*f.find("i64")->to_int(), -9000000000000000000ll);
    EXPECT_EQ(f.get_float("f64"), 1e-300);
    EXPECT_EQ(f.get_string_array("strs"), (std::vector<std::string_view>{"a", "", "ccc"}));
    EXPECT_EQ(f.get_int_array("ints"), (std::vector<int64_t>{1, -2, 3}));
    const GgufValue& n = *f.find("nested");
    ASSERT_EQ(n.elem_type(), GgufType::kArray);
    ASSERT_EQ(n.size(), 2u);
    EXPECT_EQ(n.at(0).size(), 2u);
    EXPECT_EQ(*n.at(0).at(1).to_uint(), 2u);
    EXPECT_EQ(*n.at(1).at(0).to_uint(), 3u);
    // Tensors: the data section starts at a multiple of 64, each tensor at the previous end rounded up to 64.
    EXPECT_EQ(f.data_offset() % 64, 0u);
    ASSERT_EQ(f.tensors().size(), 3u);
    const GgufTensorInfo& a = f.tensor("a.weight");
    EXPECT_EQ(a.ne, (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(a.nbytes, 24u);
    EXPECT_EQ(a.offset, 0u);
    float a5;
    std::memcpy(&a5, a.data + 20, 4);
    EXPECT_EQ(a5, 2.5f);
    EXPECT_EQ(f.tensor("b.weight").nbytes, 68u);  // 2 blocks of 34
    EXPECT_EQ(f.tensor("b.weight").offset, 64u);
    EXPECT_EQ(f.tensor("c.weight").nbytes, 96u);  // 256 / 4 code bytes + the 32-byte scale tail
    EXPECT_EQ(f.tensor("c.weight").offset, 192u);
    EXPECT_EQ(f.tensor("c.weight").data, b.data() + f.data_offset() + 192);
    EXPECT_EQ(f.find_tensor("missing"), nullptr);
  }
}

TEST(Gguf, TypedGettersNameTheKey) {
  const auto b = sample_writer().bytes();
  const GgufFile f = GgufFile::parse(b.data(), b.size(), "sample.gguf");
  auto err = [&](auto fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(err([&] { f.get_string("nope"); }), "sample.gguf: metadata 'nope' is missing");
  EXPECT_EQ(err([&] { f.get_uint("str"); }), "sample.gguf: metadata 'str' has type STRING, expected an integer");
  EXPECT_EQ(err([&] { f.get_uint("i8"); }), "sample.gguf: metadata 'i8' is -100, expected a non-negative integer");
  EXPECT_EQ(err([&] { f.get_bool("u8"); }), "sample.gguf: metadata 'u8' has type UINT8, expected BOOL");
  EXPECT_EQ(err([&] { f.get_string_array("ints"); }),
            "sample.gguf: metadata 'ints' has type ARRAY of INT32, expected ARRAY of STRING");
  EXPECT_EQ(err([&] { f.tensor("x"); }), "sample.gguf: tensor 'x' is missing");
  EXPECT_FALSE(f.find_string("absent").has_value());
}

TEST(Gguf, Fixtures) {
  REQUIRE_GGUF_FIXTURES(dir);
  struct Want {
    const char* file;
    const char* arch;
    size_t tensors;
    std::map<std::string, int> types;
  };
  const std::vector<Want> want = {
      {"tiny-bitnet-F16.gguf", "bitnet", 90, {{"F16", 57}, {"F32", 33}}},
      {"tiny-bitnet-TQ2_0.gguf", "bitnet", 90, {{"F16", 1}, {"F32", 33}, {"TQ2_0", 56}}},
      {"tiny-bitnet-I2_S.gguf", "bitnet-b1.58", 90, {{"F16", 1}, {"F32", 33}, {"I2_S", 56}}},
      {"tiny-qwen2-Q8_0.gguf", "qwen2", 98, {{"Q8_0", 57}, {"F32", 41}}},
  };
  for (const auto& w : want) {
    SCOPED_TRACE(w.file);
    const GgufFile f = GgufFile::open(dir + "/" + w.file);
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.get_string("general.architecture"), w.arch);
    EXPECT_EQ(f.get_uint(std::string(w.arch) + ".block_count"), 8u);
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 8192u);
    EXPECT_EQ(f.get_string_array("tokenizer.ggml.merges").size(), 7931u);
    EXPECT_EQ(f.tensors().size(), w.tensors);
    std::map<std::string, int> types;
    for (const auto& t : f.tensors()) ++types[ggml_type_name(t.type)];
    EXPECT_EQ(types, w.types);
    EXPECT_EQ(f.tensor("token_embd.weight").ne, (std::vector<int64_t>{256, 8192}));
    EXPECT_EQ(f.tensor("blk.7.ffn_down.weight").ne, (std::vector<int64_t>{768, 256}));
    EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
    // The last tensor ends within the file, at most alignment - 1 bytes of padding before the end.
    const GgufTensorInfo& last = f.tensors().back();
    EXPECT_LE(f.data_offset() + last.offset + last.nbytes, f.file_size());
  }
  const GgufFile i2 = GgufFile::open(dir + "/tiny-bitnet-I2_S.gguf");
  EXPECT_EQ(i2.tensor("blk.0.attn_q.weight").nbytes, 256u * 256 / 4 + 32);
}

TEST(Gguf, EveryTruncationIsAnError) {
  const auto full = sample_writer().bytes();
  const GgufFile ok = GgufFile::parse(full.data(), full.size(), "x");
  const uint64_t data_end = ok.data_offset() + ok.tensors().back().offset + ok.tensors().back().nbytes;
  for (size_t n = 0; n < data_end; ++n) {
    std::vector<uint8_t> b(full.begin(), full.begin() + static_cast<int64_t>(n));
    const std::string msg = parse_error(b);
    EXPECT_EQ(msg.rfind("bad.gguf: ", 0), 0u) << "prefix " << n << ": " << msg;
    EXPECT_TRUE(msg.find("truncated") != std::string::npos || msg.find("past the end") != std::string::npos ||
                msg.find("cannot fit") != std::string::npos || msg.find("needs bytes") != std::string::npos)
        << "prefix " << n << ": " << msg;
  }
}

TEST(Gguf, TruncatedFixture) {
  REQUIRE_GGUF_FIXTURES(dir);
  const auto full = test::read_bytes(dir + "/tiny-bitnet-I2_S.gguf");
  for (size_t n : {size_t{3}, size_t{20}, size_t{1000}, size_t{400000}, size_t{600000}, full.size() - 40}) {
    std::vector<uint8_t> b(full.begin(), full.begin() + static_cast<int64_t>(n));
    const std::string msg = parse_error(b);
    EXPECT_EQ(msg.rfind("bad.gguf: ", 0), 0u) << msg;
    std::printf("  truncated at %zu: %s\n", n, msg.c_str());
  }
}

TEST(Gguf, DamagedHeaders) {
  const auto good = sample_writer().bytes();
  {
    auto b = good;
    b[0] = 'X';
    EXPECT_GGUF_ERROR(b, "not a GGUF file (magic 'XGUF'");
  }
  {
    auto b = good;
    poke<uint32_t>(b, 4, 1);
    EXPECT_GGUF_ERROR(b, "GGUF version 1 is not supported");
    poke<uint32_t>(b, 4, 0x03000000);
    EXPECT_GGUF_ERROR(b, "big-endian");
    poke<uint32_t>(b, 4, 7);
    EXPECT_GGUF_ERROR(b, "unsupported GGUF version 7");
  }
  {
    auto b = good;
    poke<uint64_t>(b, 8, uint64_t{1} << 62);
    EXPECT_GGUF_ERROR(b, "tensor count 4611686018427387904 cannot fit");
    b = good;
    poke<uint64_t>(b, 16, ~uint64_t{0});
    EXPECT_GGUF_ERROR(b, "metadata count 18446744073709551615 cannot fit");
  }
  {  // a key length past the end
    auto b = good;
    poke<uint64_t>(b, 24, uint64_t{1} << 40);
    EXPECT_GGUF_ERROR(b, "metadata key #0 has length 1099511627776, past the end of the file");
  }
  {  // an unknown value type for key "u8" (the type word follows the 8-byte length and 2 key bytes)
    auto b = good;
    poke<uint32_t>(b, 24 + 8 + 2, 13);
    EXPECT_GGUF_ERROR(b, "metadata 'u8': unknown value type 13");
  }
  {  // a huge array count and an unknown element type
    auto b = good;
    const size_t at = find_bytes(b, "strs") + 4 + 4 + 4;  // key, value type, element type
    poke<uint64_t>(b, at, uint64_t{1} << 60);
    EXPECT_GGUF_ERROR(b, "metadata 'strs': array of 1152921504606846976 STRING elements cannot fit");
    b = good;
    poke<uint32_t>(b, at - 4, 99);
    EXPECT_GGUF_ERROR(b, "metadata 'strs': unknown array element type 99");
  }
  {  // a duplicate key
    GgufWriter w;
    w.add_u32("k", 1);
    w.add_u32("k", 2);
    EXPECT_GGUF_ERROR(w.bytes(), "metadata 'k' appears twice");
  }
  {  // arrays nested 17 deep
    std::vector<uint8_t> v;
    for (int d = 0; d < 17; ++d) {
      GgufWriter::put<uint32_t>(v, static_cast<uint32_t>(GgufType::kArray));
      GgufWriter::put<uint64_t>(v, 1);
    }
    GgufWriter::put<uint32_t>(v, static_cast<uint32_t>(GgufType::kUint8));
    GgufWriter::put<uint64_t>(v, 0);
    GgufWriter w;
    w.add_raw("deep", GgufType::kArray, v);
    EXPECT_GGUF_ERROR(w.bytes(), "arrays nested deeper than 16");
  }
}

TEST(Gguf, DamagedTensorDirectory) {
  auto with = [](auto edit) {
    GgufWriter w = sample_writer();
    edit(w);
    return w.bytes();
  };
  {  // wrong alignment values
    EXPECT_GGUF_ERROR(with([](GgufWriter& w) { w.add_u32("general.alignment", 0); }), "'general.alignment' is 0, not a power of two");
    EXPECT_GGUF_ERROR(with([](GgufWriter& w) { w.add_u32("general.alignment", 48); }), "is 48, not a power of two");
    EXPECT_GGUF_ERROR(with([](GgufWriter& w) { w.add_i32("general.alignment", 32); }),
                      "'general.alignment' has type INT32, expected UINT32");
    // The file is laid out for 32 but claims 64: the second tensor's offset (32) is not a multiple of 64.
    GgufWriter w = sample_writer();
    w.add_u32("general.alignment", 64);
    EXPECT_GGUF_ERROR(w.bytes(3, 32), "tensor 'b.weight' has offset 32, not a multiple of general.alignment 64");
  }
  auto b = sample_writer().bytes();
  const size_t a_dims = find_bytes(b, "a.weight") + 8;  // n_dims of tensor a
  {
    auto c = b;
    poke<uint32_t>(c, a_dims, 5);
    EXPECT_GGUF_ERROR(c, "tensor 'a.weight' has 5 dimensions (1 to 4 allowed)");
  }
  {  // huge dimensions: overflow of the element count
    auto c = b;
    poke<uint64_t>(c, a_dims + 4, uint64_t{1} << 62);
    poke<uint64_t>(c, a_dims + 12, uint64_t{1} << 62);
    EXPECT_GGUF_ERROR(c, "tensor 'a.weight' has a shape too large");
  }
  {  // unknown tensor type
    auto c = b;
    poke<uint32_t>(c, a_dims + 4 + 16, 77);
    EXPECT_GGUF_ERROR(c, "tensor 'a.weight' has unknown ggml type type 77");
    poke<uint32_t>(c, a_dims + 4 + 16, 37);
    EXPECT_GGUF_ERROR(c, "tensor 'a.weight' has unknown ggml type 37 (bitnet.cpp TL1)");
  }
  {  // a block type whose ne[0] is not a multiple of its block
    const size_t b_dims = find_bytes(b, "b.weight") + 8;
    auto c = b;
    poke<uint64_t>(c, b_dims + 4, 48);
    EXPECT_GGUF_ERROR(c, "tensor 'b.weight' (Q8_0) has ne[0] = 48, not a multiple of the block size 32");
  }
  {  // bytes that do not match shape x type: b grows to [96] (3 blocks, 102 bytes), so c's offset no longer follows it
    const size_t b_dims = find_bytes(b, "b.weight") + 8;
    auto c = b;
    poke<uint64_t>(c, b_dims + 4, 96);
    EXPECT_GGUF_ERROR(c, "tensor 'c.weight' has offset 128, expected 160", "do not match the shapes and types");
  }
  {  // the last tensor made larger than the data left: past the end
    const size_t c_dims = find_bytes(b, "c.weight") + 8;
    auto c = b;
    poke<uint64_t>(c, c_dims + 12, 4);
    EXPECT_GGUF_ERROR(c, "tensor 'c.weight' (I2_S, [128, 4]) needs bytes [128, 288) of the data section, which has 224");
  }
  {  // an offset past the end of the file
    const size_t c_off = find_bytes(b, "c.weight") + 8 + 4 + 16 + 4;
    auto c = b;
    poke<uint64_t>(c, c_off, uint64_t{1} << 40);
    EXPECT_GGUF_ERROR(c, "tensor 'c.weight' has offset 1099511627776, expected 128");
    poke<uint64_t>(c, c_off, 3);
    EXPECT_GGUF_ERROR(c, "tensor 'c.weight' has offset 3, not a multiple of general.alignment 32");
  }
  {  // duplicate tensor names
    GgufWriter w;
    w.add_tensor("t", 0, {1}, std::vector<uint8_t>(4));
    w.add_tensor("t", 0, {1}, std::vector<uint8_t>(4));
    EXPECT_GGUF_ERROR(w.bytes(), "tensor 't' appears twice");
  }
  {  // I2_S with a weight count that is not a multiple of 4
    GgufWriter w;
    w.add_tensor("t", 36, {6}, std::vector<uint8_t>(40));
    EXPECT_GGUF_ERROR(w.bytes(), "tensor 't' (I2_S) has 6 weights, not a multiple of 4");
  }
}

TEST(Gguf, NotGgufFilesAreRecognised) {
  test::TempDir d;
  test::write_bytes(d.file("x.gguf"), sample_writer().bytes());
  test::write_bytes(d.file("y.bin"), {'G', 'G', 'M', 'L', 0, 0});
  EXPECT_TRUE(is_gguf_file(d.file("x.gguf")));
  EXPECT_FALSE(is_gguf_file(d.file("y.bin")));
  EXPECT_FALSE(is_gguf_file(d.file("absent.gguf")));
  EXPECT_FALSE(is_gguf_file(d.path().string()));
  try {
    GgufFile::open(d.file("y.bin"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("y.bin: not a GGUF file (magic 'GGML', expected 'GGUF')"), std::string::npos) << e.what();
  }
}

// The fuzzer's seeds (tests/fuzz/gguf, written by tests/fuzz/make_gguf_seeds.py) are valid files.
TEST(Gguf, FuzzSeedsAreValid) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(TRITIUM_SOURCE_DIR) + "/tests/fuzz/gguf")) {
    const GgufFile f = GgufFile::open(e.path().string());
    EXPECT_TRUE(f.version() == 2 || f.version() == 3) << e.path();
    ++n;
  }
  EXPECT_EQ(n, 8);  // six written by make_gguf_seeds.py, two fuzz findings (empty_f32_tensor, empty_i2_s_tensor)
  const GgufFile t = GgufFile::open(std::string(TRITIUM_SOURCE_DIR) + "/tests/fuzz/gguf/tensors.gguf");
  EXPECT_EQ(t.alignment(), 64u);
  EXPECT_EQ(t.tensors().size(), 7u);
  for (int64_t block : {64, 128}) {
    const GgufFile q = GgufFile::open(std::string(TRITIUM_SOURCE_DIR) + "/tests/fuzz/gguf/q2_0_g" +
                                      std::to_string(block) + ".gguf");
    EXPECT_EQ(q.tensor("small").block, block);
    EXPECT_EQ(q.tensor("large").block, block);
  }
}
