// safetensors writer/reader round trip; the layout Python's safetensors accepts (no gaps).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/safetensors.h"

using namespace tritium;

TEST(Safetensors, WriteReadRoundTripBackToBack) {
  const auto path = (std::filesystem::temp_directory_path() / "tritium_st_test.safetensors").string();
  std::vector<uint16_t> a = {0x3f80, 0xc040, 0x0000};  // bf16 1, -3, 0
  std::vector<uint8_t> b = {1, 2, 3, 4, 5};
  std::vector<float> c = {0.5f, -2.0f};
  write_safetensors(path, {{"a", DType::BF16, {3}, a.data(), 6}, {"b", DType::U8, {5, 1}, b.data(), 5},
                           {"c", DType::F32, {2}, c.data(), 8}},
                    {{"format", "pt"}});
  SafetensorsFile f(path);
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(tensor_to_f32(*f.find("a")), (std::vector<float>{1.0f, -3.0f, 0.0f}));
  EXPECT_EQ(std::vector<uint8_t>(f.find("b")->data, f.find("b")->data + 5), b);
  EXPECT_EQ(tensor_to_f32(*f.find("c")), c);
  EXPECT_EQ(f.find("b")->data, f.find("a")->data + 6);  // no gap: offsets are contiguous
  EXPECT_EQ(f.find("c")->data, f.find("b")->data + 5);
  EXPECT_EQ(f.metadata()["format"], "pt");
  EXPECT_EQ(f.find("b")->shape_str(), "[5, 1]");
  std::filesystem::remove(path);
}

TEST(Safetensors, ShardedIndexRejectsPathsOutsideTheFolder) {
  const auto dir = std::filesystem::temp_directory_path() / "tritium_st_shards";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "model.safetensors.index.json") << R"({"weight_map": {"x": "../evil.safetensors"}})";
  EXPECT_THROW(WeightStore ws(dir.string()), Error);
  std::vector<float> v = {1, 2};
  write_safetensors((dir / "model-00001-of-00002.safetensors").string(), {{"x", DType::F32, {2}, v.data(), 8}}, {});
  write_safetensors((dir / "model-00002-of-00002.safetensors").string(), {{"y", DType::F32, {1}, v.data(), 4}}, {});
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"weight_map": {"x": "model-00001-of-00002.safetensors", "y": "model-00002-of-00002.safetensors"}})";
  WeightStore ws(dir.string());
  EXPECT_EQ(ws.get("y", {1}).numel(), 1);
  EXPECT_EQ(tensor_to_f32(ws.get("x")), v);
  EXPECT_THROW(ws.get("z"), Error);
  EXPECT_THROW(ws.get("x", {3}), Error);
  std::filesystem::remove_all(dir);
}
