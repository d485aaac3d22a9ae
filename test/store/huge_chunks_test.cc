#include "store/huge_chunks_internal.h"

#include <sys/mman.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace rocksort::store {
namespace {

TEST(HugeChunkPool, ChunksAreAlignedToAHugePageAndWritable) {
  HugeChunkPool pool;
  char* a = pool.Take();
  char* b = pool.Take();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  for (char* chunk : {a, b}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(chunk) % HugeChunkPool::kChunkBytes, 0u);
    std::memset(chunk, 0x5a, HugeChunkPool::kChunkBytes);  // Every byte is ours.
  }
  EXPECT_EQ(pool.mapped_chunks(), 2u);
  pool.Give(a);
  pool.Give(b);
}

TEST(HugeChunkPool, GivenChunksAreReusedUntilTrimmed) {
  HugeChunkPool pool;
  char* a = pool.Take();
  ASSERT_NE(a, nullptr);
  a[0] = 7;
  pool.Give(a);
  char* again = pool.Take();
  EXPECT_EQ(again, a);  // Reused, faulted-in memory and all.
  EXPECT_EQ(again[0], 7);
  EXPECT_EQ(pool.mapped_chunks(), 1u);
  pool.Give(again);
  EXPECT_EQ(pool.Trim(), HugeChunkPool::kChunkBytes);
  EXPECT_EQ(pool.mapped_chunks(), 0u);
  EXPECT_EQ(pool.Trim(), 0u);
}

TEST(HugeChunkPool, TrimKeepsChunksInUse) {
  HugeChunkPool pool;
  char* used = pool.Take();
  char* freed = pool.Take();
  pool.Give(freed);
  EXPECT_EQ(pool.Trim(), HugeChunkPool::kChunkBytes);
  EXPECT_EQ(pool.mapped_chunks(), 1u);
  used[HugeChunkPool::kChunkBytes - 1] = 1;  // Still mapped.
  pool.Give(used);
}

// Waits up to 10 s for `pool` to have `chunks` mapped.
bool AwaitMapped(const HugeChunkPool& pool, size_t chunks) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (pool.mapped_chunks() != chunks) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Pages of `chunk` the process has in memory (mincore).
size_t ResidentPages(char* chunk) {
  std::vector<unsigned char> pages(HugeChunkPool::kChunkBytes / 4096);
  if (mincore(chunk, HugeChunkPool::kChunkBytes, pages.data()) != 0) return 0;
  size_t resident = 0;
  for (unsigned char page : pages) resident += page & 1;
  return resident;
}

// The prefault thread keeps `ahead` chunks faulted in and free, maps more as
// chunks are taken, and stops at its limit; Trim stops it.
TEST(HugeChunkPool, PrefaultKeepsChunksReadyAheadUpToItsLimit) {
  HugeChunkPool pool;
  pool.StartPrefault(/*ahead=*/3, /*limit=*/5);
  ASSERT_TRUE(AwaitMapped(pool, 3));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(pool.mapped_chunks(), 3u);  // No more than `ahead` free.
  std::vector<char*> taken;
  for (int i = 0; i < 3; ++i) {
    taken.push_back(pool.Take());
    ASSERT_NE(taken.back(), nullptr);
    EXPECT_EQ(ResidentPages(taken.back()), HugeChunkPool::kChunkBytes / 4096);
  }
  ASSERT_TRUE(AwaitMapped(pool, 5));  // Three taken, two more ready: the limit.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(pool.mapped_chunks(), 5u);
  for (char* chunk : taken) pool.Give(chunk);
  EXPECT_EQ(pool.Trim(), 5 * HugeChunkPool::kChunkBytes);
  EXPECT_EQ(pool.mapped_chunks(), 0u);
}

}  // namespace
}  // namespace rocksort::store
