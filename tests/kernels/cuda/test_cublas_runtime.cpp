// cuBLAS / cuBLASLt loaded at first use (kernels/cuda/cublas_runtime.h): the libraries load and every entry point
// tritium calls resolves, with or without a GPU.
#include <gtest/gtest.h>

#if !TRITIUM_HAVE_CUDA

TEST(CublasRuntime, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }

#else

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <elf.h>
#include <link.h>

#include <string>

#include "kernels/cuda/cublas_runtime.h"

TEST(CublasRuntime, EveryEntryPointResolves) {
  const std::vector<std::string> missing = tritium::cuda::cublas_unresolved_entry_points();
  EXPECT_TRUE(missing.empty()) << fmt::format("{}", fmt::join(missing, ", "));
}

// The binary does not link them: a CPU-only run never maps them (the dynamic section's DT_NEEDED entries name no
// libcublas).
TEST(CublasRuntime, BinaryDoesNotLinkCublas) {
  const char* strtab = nullptr;
  for (const ElfW(Dyn)* d = _DYNAMIC; d->d_tag != DT_NULL; ++d)
    if (d->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char*>(d->d_un.d_ptr);
  ASSERT_NE(strtab, nullptr);
  int needed = 0;
  for (const ElfW(Dyn)* d = _DYNAMIC; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag != DT_NEEDED) continue;
    const std::string name = strtab + d->d_un.d_val;
    ++needed;
    EXPECT_EQ(name.find("libcublas"), std::string::npos) << name;
  }
  EXPECT_GT(needed, 0);  // the walk saw the libraries the binary does link (libstdc++, libcudart, ...)
}

#endif
