#include "common/memory_info.h"

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "test_util.h"

namespace rocksort {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMiB = uint64_t{1} << 20;

// A fake /proc and /sys/fs/cgroup.
class PageCacheRoomTest : public ::testing::Test {
 protected:
  void SetUp() override {
    proc_ = dir_.File("proc");
    cgroup_ = dir_.File("cgroup");
    fs::create_directories(proc_ + "/self");
    fs::create_directories(cgroup_);
  }
  void Write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    test_util::WriteFileOrDie(path, text);
  }
  void MemAvailable(uint64_t mib) {
    Write(proc_ + "/meminfo", "MemTotal:       24000000 kB\nMemFree:        100 kB\n"
                              "MemAvailable:   " + std::to_string(mib * 1024) + " kB\n");
  }
  CacheRoom Room() { return PageCacheRoom(proc_, cgroup_); }

  test_util::ScratchDir dir_;
  std::string proc_, cgroup_;
};

TEST_F(PageCacheRoomTest, NothingReadableIsZero) {
  EXPECT_EQ(Room().bytes, 0u);
  EXPECT_EQ(Room().source, "");
}

TEST_F(PageCacheRoomTest, WithoutCgroupsMemAvailable) {
  MemAvailable(20000);
  EXPECT_EQ(Room().bytes, 20000 * kMiB);
  EXPECT_EQ(Room().source, "MemAvailable 20000 MiB");
}

TEST_F(PageCacheRoomTest, V1LimitLessAnonymousMemory) {
  MemAvailable(20000);
  Write(proc_ + "/self/cgroup", "7:blkio:/bench/run1\n4:memory:/bench/run1\n0::/\n");
  Write(cgroup_ + "/memory/bench/run1/memory.limit_in_bytes", std::to_string(448 * kMiB) + "\n");
  Write(cgroup_ + "/memory/bench/run1/memory.stat",
        "cache 1\nrss 5\ntotal_cache 300\ntotal_rss " + std::to_string(96 * kMiB) + "\n");
  // The parents have no limit (v1 writes a huge value).
  Write(cgroup_ + "/memory/bench/memory.limit_in_bytes", "9223372036854771712\n");
  Write(cgroup_ + "/memory/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_EQ(Room().bytes, (448 - 96) * kMiB);
  EXPECT_EQ(Room().source, "cgroup /bench/run1: limit 448 MiB, anon 96 MiB");
}

TEST_F(PageCacheRoomTest, TightestAncestorHolds) {
  MemAvailable(20000);
  Write(proc_ + "/self/cgroup", "4:cpu,memory:/a/b\n");
  Write(cgroup_ + "/memory/a/b/memory.limit_in_bytes", std::to_string(2048 * kMiB));
  Write(cgroup_ + "/memory/a/memory.limit_in_bytes", std::to_string(1024 * kMiB));
  Write(cgroup_ + "/memory/a/memory.stat", "total_rss " + std::to_string(24 * kMiB) + "\n");
  EXPECT_EQ(Room().bytes, 1000 * kMiB);
}

TEST_F(PageCacheRoomTest, MemAvailableBelowTheLimitHolds) {
  MemAvailable(300);
  Write(proc_ + "/self/cgroup", "4:memory:/run\n");
  Write(cgroup_ + "/memory/run/memory.limit_in_bytes", std::to_string(448 * kMiB));
  EXPECT_EQ(Room().bytes, 300 * kMiB);
  EXPECT_EQ(Room().source, "MemAvailable 300 MiB");
}

TEST_F(PageCacheRoomTest, V2MaxAndAnon) {
  MemAvailable(20000);
  Write(proc_ + "/self/cgroup", "0::/user/job\n");
  Write(cgroup_ + "/cgroup.controllers", "cpu memory io\n");
  Write(cgroup_ + "/user/job/memory.max", std::to_string(512 * kMiB) + "\n");
  Write(cgroup_ + "/user/job/memory.stat",
        "anon " + std::to_string(12 * kMiB) + "\nanon_thp 0\nfile 999\n");
  Write(cgroup_ + "/user/memory.max", "max\n");
  EXPECT_EQ(Room().bytes, 500 * kMiB);
}

TEST_F(PageCacheRoomTest, V2HybridMountWithoutMemoryIsSkipped) {
  MemAvailable(20000);
  Write(proc_ + "/self/cgroup", "0::/\n");
  Write(cgroup_ + "/unified/cgroup.controllers", "");
  EXPECT_EQ(Room().bytes, 20000 * kMiB);
}

TEST_F(PageCacheRoomTest, AnonymousMemoryAboveTheLimitLeavesNoRoom) {
  MemAvailable(20000);
  Write(proc_ + "/self/cgroup", "4:memory:/run\n");
  Write(cgroup_ + "/memory/run/memory.limit_in_bytes", std::to_string(64 * kMiB));
  Write(cgroup_ + "/memory/run/memory.stat", "total_rss " + std::to_string(80 * kMiB) + "\n");
  EXPECT_EQ(Room().bytes, 0u);
}

}  // namespace
}  // namespace rocksort
