#include "store/huge_chunks_internal.h"

#include <cstdint>
#include <cstring>

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

}  // namespace
}  // namespace rocksort::store
