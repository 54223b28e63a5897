// parallel_for: every index runs exactly once in grain-aligned chunks, for any thread count, also when called
// from inside a chunk (nested) or from several threads at once.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "core/parallel.h"

using namespace tritium;

namespace {

void expect_each_index_once(int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  parallel_for(n, grain, [&](int64_t b, int64_t e) {
    EXPECT_EQ(b % grain, 0);
    EXPECT_TRUE(e == n || e % grain == 0);
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n " << n << " at " << i;
}

}  // namespace

TEST(Parallel, EveryIndexOnceForAnyThreadCount) {
  for (int threads : {1, 2, 3, 8}) {
    set_num_threads(threads);
    for (int64_t n : {1, 7, 64, 1000, 4097}) {
      expect_each_index_once(n, 1);
      expect_each_index_once(n, 16);
    }
    for (int rep = 0; rep < 2000; ++rep) expect_each_index_once(64, 4);  // back-to-back jobs on the pool
  }
  set_num_threads(0);
}

TEST(Parallel, NestedAndConcurrentCallsRunEverything) {
  set_num_threads(2);
  std::atomic<int64_t> sum{0};
  parallel_for(8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      parallel_for(100, 1, [&](int64_t b2, int64_t e2) { sum.fetch_add(e2 - b2); });
  });
  EXPECT_EQ(sum.load(), 800);
  std::vector<std::thread> callers;
  std::atomic<int64_t> total{0};
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 200; ++rep) parallel_for(50, 1, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 3 * 200 * 50);
  set_num_threads(0);
}
