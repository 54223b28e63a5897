// MappedFile::read_at (the bytes of the mapping, errors naming the file for ranges outside it and for a file
// truncated since it was opened) and Scratch (grow-only buffers).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/scratch.h"

using namespace tritium;
namespace fs = std::filesystem;

namespace {

fs::path write_file(const std::string& name, size_t n) {
  const fs::path p = fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::ofstream out(p, std::ios::binary);
  for (size_t i = 0; i < n; ++i) out.put(static_cast<char>((i * 7 + 3) & 0xff));
  return p;
}

}  // namespace

TEST(MappedFile, ReadAtCopiesTheMappedBytes) {
  const fs::path p = write_file("tritium_read_at", 70000);
  const MappedFile f(p.string());
  ASSERT_EQ(f.size(), 70000u);
  for (const auto& [off, n] : std::vector<std::pair<size_t, size_t>>{{0, 1}, {4095, 10}, {12345, 5120}, {69990, 10},
                                                                     {70000, 0}}) {
    std::vector<uint8_t> got(n + 1, 0xAA);
    f.read_at(off, n, got.data());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], f.data()[off + i]) << "offset " << off + i;
    EXPECT_EQ(got[n], 0xAA) << "wrote past the range";
  }
  fs::remove(p);
}

TEST(MappedFile, ReadAtOutsideTheFileIsAnError) {
  const fs::path p = write_file("tritium_read_at_range", 100);
  const MappedFile f(p.string());
  std::vector<uint8_t> buf(200);
  for (const auto& [off, n] : std::vector<std::pair<size_t, size_t>>{{90, 11}, {101, 0}, {0, 101}, {SIZE_MAX, 2}}) {
    try {
      f.read_at(off, n, buf.data());
      ADD_FAILURE() << "read of " << n << " bytes at " << off << " did not throw";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
    }
  }
  fs::remove(p);
}

TEST(MappedFile, ReadAtAfterTheFileShrankIsAnError) {
  const fs::path p = write_file("tritium_read_at_trunc", 10000);
  const MappedFile f(p.string());
  fs::resize_file(p, 100);  // another process truncated it: the mapping's size is stale
  std::vector<uint8_t> buf(64);
  f.read_at(0, 64, buf.data());  // still inside the file
  try {
    f.read_at(5000, 64, buf.data());
    ADD_FAILURE() << "a read past the new end did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shorter"), std::string::npos) << e.what();
  }
  fs::remove(p);
}

TEST(Scratch, GrowsAndKeepsItsLargestBlock) {
  Scratch<int32_t> s;
  EXPECT_EQ(s.capacity(), 0u);
  int32_t* a = s.get(100);
  ASSERT_NE(a, nullptr);
  for (int i = 0; i < 100; ++i) a[i] = i;
  EXPECT_EQ(s.get(50), a);  // smaller: the same block, contents kept
  EXPECT_EQ(s.get(100), a);
  EXPECT_EQ(a[99], 99);
  s.get(101);  // one more: half again, so a growing request does not reallocate every step
  EXPECT_EQ(s.capacity(), 150u);
  s.get(1000);
  EXPECT_EQ(s.capacity(), 1000u);
}
