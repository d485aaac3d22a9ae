#include "loader/readahead_internal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace rocksort::loader {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// A file of `size` bytes on a disk-backed filesystem (the test's working
// directory, under the build tree), dropped from the page cache.
class ReadaheadTest : public testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::current_path() / ("readahead_test." + std::to_string(::getpid()));
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd_, 0);
    std::vector<char> block(kMiB, 'x');
    for (uint64_t i = 0; i < kSize / kMiB; ++i) {
      ASSERT_EQ(::write(fd_, block.data(), block.size()), static_cast<ssize_t>(block.size()));
    }
    ASSERT_EQ(::fsync(fd_), 0);
    ASSERT_EQ(::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED), 0);
    ASSERT_EQ(::lseek(fd_, 0, SEEK_SET), 0);
    if (ResidentBytes(0, kSize) > kSize / 8) {
      GTEST_SKIP() << "this filesystem keeps files in memory (tmpfs?): can't observe readahead";
    }
  }
  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
    std::filesystem::remove(path_);
  }

  // Bytes of [offset, offset + len) in the page cache (mincore).
  uint64_t ResidentBytes(uint64_t offset, uint64_t len) {
    void* map = ::mmap(nullptr, kSize, PROT_READ, MAP_SHARED, fd_, 0);
    if (map == MAP_FAILED) return 0;
    const long page = ::sysconf(_SC_PAGESIZE);
    std::vector<unsigned char> vec((kSize + page - 1) / page);
    uint64_t resident = 0;
    if (::mincore(map, kSize, vec.data()) == 0) {
      for (uint64_t p = offset / page; p < (offset + len) / page; ++p) {
        if (vec[p] & 1) resident += page;
      }
    }
    ::munmap(map, kSize);
    return resident;
  }

  // Waits up to 20 s (a loaded CI machine, sanitizers) for
  // [offset, offset + len) to be fully resident.
  bool WaitResident(uint64_t offset, uint64_t len) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      if (ResidentBytes(offset, len) == len) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  static constexpr uint64_t kSize = 48 * kMiB;
  std::filesystem::path path_;
  int fd_ = -1;
};

TEST_F(ReadaheadTest, ReadsTheWindowAheadOfTheOffsetAndFollowsIt) {
  // What SetUp's POSIX_FADV_DONTNEED could not drop (pages the kernel still
  // held in a per-CPU batch) is not the readahead's doing.
  const uint64_t beyond_before = ResidentBytes(8 * kMiB, 16 * kMiB);
  SequentialReadahead readahead(fd_, kSize, /*window=*/4 * kMiB, /*chunk=*/1 * kMiB);
  EXPECT_TRUE(WaitResident(0, 4 * kMiB));
  // Nothing far beyond the window (the kernel may round a request up a bit).
  EXPECT_LT(ResidentBytes(8 * kMiB, 16 * kMiB), beyond_before + 2 * kMiB);
  // The reader moves on: the window follows its offset.
  ASSERT_EQ(::lseek(fd_, 12 * kMiB, SEEK_SET), static_cast<off_t>(12 * kMiB));
  EXPECT_TRUE(WaitResident(12 * kMiB, 4 * kMiB));
  readahead.Stop();
  readahead.Stop();  // Idempotent.
}

TEST_F(ReadaheadTest, StopsAtTheEndOfTheFile) {
  ASSERT_EQ(::lseek(fd_, kSize - kMiB, SEEK_SET), static_cast<off_t>(kSize - kMiB));
  const uint64_t earlier_before = ResidentBytes(0, kSize - 2 * kMiB);  // As above.
  SequentialReadahead readahead(fd_, kSize, /*window=*/16 * kMiB, /*chunk=*/2 * kMiB);
  EXPECT_TRUE(WaitResident(kSize - kMiB, kMiB));
  EXPECT_LT(ResidentBytes(0, kSize - 2 * kMiB), earlier_before + 2 * kMiB);
}

TEST_F(ReadaheadTest, DropsWhatTheReaderLeftAWindowBehind) {
  // The reader has read the first 12 MiB (now in the page cache) and moves
  // on: everything more than a window behind it leaves the cache, the
  // window behind stays.
  std::vector<char> buffer(kMiB);
  for (uint64_t offset = 0; offset < 12 * kMiB; offset += kMiB) {
    ASSERT_EQ(::pread(fd_, buffer.data(), kMiB, static_cast<off_t>(offset)),
              static_cast<ssize_t>(kMiB));
  }
  ASSERT_TRUE(WaitResident(0, 12 * kMiB));
  ASSERT_EQ(::lseek(fd_, 12 * kMiB, SEEK_SET), static_cast<off_t>(12 * kMiB));
  SequentialReadahead readahead(fd_, kSize, /*window=*/4 * kMiB, /*chunk=*/1 * kMiB);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (ResidentBytes(0, 8 * kMiB) > kMiB && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_LE(ResidentBytes(0, 8 * kMiB), kMiB);
  EXPECT_EQ(ResidentBytes(8 * kMiB, 4 * kMiB), 4 * kMiB);
}

TEST_F(ReadaheadTest, LeavesNothingCachedBehindAReaderAtAnyOffset) {
  // A decoder's file offset moves in steps that end anywhere. The kernel
  // caches what the readahead reads in folios of up to 2 MiB, and a drop
  // ending inside one keeps it: dropping behind at the reader's offsets as
  // they come left most of the file cached (common/page_cache.h).
  // The file is cached as a reader's large sequential reads leave it (the
  // kernel's readahead for them builds large folios where it can).
  std::vector<char> buffer(2 * kMiB);
  for (uint64_t at = 0; at < kSize; at += buffer.size()) {
    ASSERT_EQ(::pread(fd_, buffer.data(), buffer.size(), static_cast<off_t>(at)),
              static_cast<ssize_t>(buffer.size()));
  }
  constexpr uint64_t kWindow = 4 * kMiB;
  SequentialReadahead readahead(fd_, kSize, kWindow, /*chunk=*/2 * kMiB);
  uint64_t offset = 0;
  for (uint64_t next = 0; next + kWindow < kSize; next += 1'363'149) {
    offset = next;
    ASSERT_EQ(::lseek(fd_, static_cast<off_t>(offset), SEEK_SET), static_cast<off_t>(offset));
    // Time for the readahead (which polls every 5 ms) to see each offset.
    absl::SleepFor(absl::Milliseconds(20));
  }
  // Nothing is left more than a window and a folio behind the reader.
  const uint64_t behind = offset - kWindow - 2 * kMiB;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (ResidentBytes(0, behind) > 256 * 1024 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_LE(ResidentBytes(0, behind), 256 * 1024) << "of " << behind << " bytes behind";
}

}  // namespace
}  // namespace rocksort::loader
