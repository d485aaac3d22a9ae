#include "store/prefetch_fs_internal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace rocksort::store {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kSize = 8 * kMiB;
// Whole first chunks, so that a test knows where chunks end; the stagger has
// tests of its own.
constexpr PrefetchFileSystem::FirstRead kWhole = PrefetchFileSystem::FirstRead::kWholeChunk;

// A table file of kSize bytes on a disk-backed filesystem, dropped from the
// page cache, opened through a PrefetchFileSystem.
class PrefetchFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("000001.sst");
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    std::vector<char> block(kMiB, 'x');
    for (uint64_t i = 0; i < kSize / kMiB; ++i) {
      ASSERT_EQ(::write(fd, block.data(), block.size()), static_cast<ssize_t>(block.size()));
    }
    ASSERT_EQ(::fsync(fd), 0);
    ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    ::close(fd);
    if (Resident(0, kSize) > kSize / 8) {
      GTEST_SKIP() << "this filesystem keeps files in memory (tmpfs?): can't observe readahead";
    }
    fs_ = std::make_shared<PrefetchFileSystem>(rocksdb::FileSystem::Default(), /*readers=*/2);
    ASSERT_TRUE(fs_->NewRandomAccessFile(path_, rocksdb::FileOptions(), &file_, nullptr).ok());
    // As RocksDB opens every table (advise_random_on_open).
    file_->Hint(rocksdb::FSRandomAccessFile::kRandom);
  }

  // Bytes of [offset, offset + len) in the page cache (mincore).
  uint64_t Resident(uint64_t offset, uint64_t len) {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    void* map = ::mmap(nullptr, kSize, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) return 0;
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> vec(kSize / page);
    uint64_t resident = 0;
    if (::mincore(map, kSize, vec.data()) == 0) {
      for (uint64_t p = offset / page; p < (offset + len) / page; ++p) {
        if (vec[p] & 1) resident += page;
      }
    }
    ::munmap(map, kSize);
    return resident;
  }

  // Waits up to 20 s (a loaded machine, sanitizers) for the range to be
  // resident.
  bool WaitResident(uint64_t offset, uint64_t len) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      if (Resident(offset, len) == len) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  // Waits up to 20 s for the reader threads to have read `bytes`.
  bool WaitPrefetched(uint64_t bytes) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      if (fs_->prefetched_bytes() >= bytes) return true;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return false;
  }

  void Read(uint64_t offset, size_t n) {
    std::vector<char> scratch(n);
    rocksdb::Slice result;
    ASSERT_TRUE(
        file_->Read(offset, n, rocksdb::IOOptions(), &result, scratch.data(), nullptr).ok());
    ASSERT_EQ(result.size(), n);
  }

  test_util::ScratchDir dir_;
  std::string path_;
  std::shared_ptr<PrefetchFileSystem> fs_;
  std::unique_ptr<rocksdb::FSRandomAccessFile> file_;
};

TEST_F(PrefetchFsTest, ReadsAChunkAheadOnceTheReaderIsWithinTheLead) {
  fs_->SetReadahead(/*chunk=*/1 * kMiB, /*lead=*/256 * kKiB, kWhole);
  // The first read of a window reads its whole chunk at once.
  Read(0, 64 * kKiB);
  EXPECT_EQ(Resident(0, kMiB), kMiB);
  EXPECT_LT(Resident(kMiB, kSize - kMiB), kMiB / 2);
  // Within the lead of the chunk's end: the next chunk is read ahead.
  Read(kMiB - 128 * kKiB, 64 * kKiB);
  EXPECT_TRUE(WaitResident(kMiB, kMiB));
  EXPECT_LT(Resident(2 * kMiB, kSize - 2 * kMiB), kMiB / 2);
  // The pages are in the cache before the reader thread's pread returns and
  // counts them: wait for the count too.
  EXPECT_TRUE(WaitPrefetched(kMiB));
}

TEST_F(PrefetchFsTest, StaggeredWindowsStartWithReadsOfDifferentLengths) {
  auto fs = std::make_shared<PrefetchFileSystem>(rocksdb::FileSystem::Default(), /*readers=*/2);
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  ASSERT_TRUE(fs->NewRandomAccessFile(path_, rocksdb::FileOptions(), &file, nullptr).ok());
  file->Hint(rocksdb::FSRandomAccessFile::kRandom);
  constexpr uint64_t kChunk = 1 * kMiB;
  constexpr uint64_t kLead = 256 * kKiB;
  fs->SetReadahead(kChunk, kLead, PrefetchFileSystem::FirstRead::kStaggered);
  // Two windows far apart (the second read is beyond the first window), each
  // opened by a read small enough that nothing is queued behind the first
  // read: what is resident is exactly each window's first read.
  std::vector<char> scratch(4 * kKiB);
  rocksdb::Slice result;
  ASSERT_TRUE(
      file->Read(0, scratch.size(), rocksdb::IOOptions(), &result, scratch.data(), nullptr).ok());
  ASSERT_TRUE(
      file->Read(4 * kMiB, scratch.size(), rocksdb::IOOptions(), &result, scratch.data(), nullptr)
          .ok());
  const uint64_t first = Resident(0, kChunk);
  const uint64_t second = Resident(4 * kMiB, kChunk);
  for (uint64_t length : {first, second}) {
    EXPECT_GE(length, kLead);
    EXPECT_LE(length, kChunk);
  }
  // Successive values of the sequence are at least 0.38 of the spread apart.
  const uint64_t apart = first > second ? first - second : second - first;
  EXPECT_GE(apart, (kChunk - kLead) / 4) << first << " " << second;
  EXPECT_EQ(fs->prefetched_bytes(), 0u);
}

TEST(PrefetchFsStaggerTest, FirstReadsSpreadEvenlyOverTheChunk) {
  PrefetchFileSystem fs(rocksdb::FileSystem::Default(), /*readers=*/1);
  const PrefetchFileSystem::Settings settings{/*chunk=*/904 * kKiB, /*lead=*/128 * kKiB,
                                              PrefetchFileSystem::FirstRead::kStaggered};
  // 254 windows (the runs of a -m 32M merge): every tenth of the spread
  // between the lead and the chunk gets its share, give or take a few.
  constexpr int kWindows = 254;
  std::vector<int> tenths(10, 0);
  for (int i = 0; i < kWindows; ++i) {
    const uint64_t length = fs.NextFirstRead(settings);
    ASSERT_GE(length, settings.lead);
    ASSERT_LT(length, settings.chunk);
    ASSERT_EQ(length % 4096, 0u);
    ++tenths[(length - settings.lead) * 10 / (settings.chunk - settings.lead)];
  }
  for (int count : tenths) {
    EXPECT_GE(count, kWindows / 10 - 3);
    EXPECT_LE(count, kWindows / 10 + 3);
  }
  // Whole first chunks: whole chunks.
  PrefetchFileSystem::Settings whole = settings;
  whole.first_read = kWhole;
  EXPECT_EQ(fs.NextFirstRead(whole), whole.chunk);
}

TEST(PrefetchFsStaggerTest, ALeadOfAChunkOrMoreStaggersTheSecondHalfOfTheChunk) {
  PrefetchFileSystem fs(rocksdb::FileSystem::Default(), /*readers=*/1);
  for (uint64_t lead : {1016 * kKiB, 8 * 1016 * kKiB}) {
    const PrefetchFileSystem::Settings settings{/*chunk=*/1016 * kKiB, lead,
                                                PrefetchFileSystem::FirstRead::kStaggered};
    constexpr int kWindows = 100;
    std::vector<int> tenths(10, 0);
    for (int i = 0; i < kWindows; ++i) {
      const uint64_t length = fs.NextFirstRead(settings);
      ASSERT_GE(length, settings.chunk / 2);
      ASSERT_LT(length, settings.chunk);
      ASSERT_EQ(length % 4096, 0u);
      ++tenths[(length - settings.chunk / 2) * 10 / (settings.chunk / 2)];
    }
    for (int count : tenths) {
      EXPECT_GE(count, kWindows / 10 - 3) << lead;
      EXPECT_LE(count, kWindows / 10 + 3) << lead;
    }
  }
  // Nothing to stagger in a chunk of a page.
  EXPECT_EQ(fs.NextFirstRead(
                {/*chunk=*/4 * kKiB, /*lead=*/4 * kKiB, PrefetchFileSystem::FirstRead::kStaggered}),
            4 * kKiB);
}

TEST_F(PrefetchFsTest, ALeadOfSeveralChunksKeepsThemAllQueued) {
  fs_->SetReadahead(/*chunk=*/1 * kMiB, /*lead=*/3 * kMiB, kWhole);
  // The first read reads its chunk, and the three after it are queued.
  Read(0, 64 * kKiB);
  EXPECT_TRUE(WaitResident(0, 4 * kMiB));
  EXPECT_TRUE(WaitPrefetched(3 * kMiB));
  // Moving a chunk on queues one more chunk, not more.
  Read(kMiB, 64 * kKiB);
  EXPECT_TRUE(WaitResident(4 * kMiB, kMiB));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_LT(Resident(5 * kMiB, kSize - 5 * kMiB), kMiB / 2);
}

TEST_F(PrefetchFsTest, DropsWhatTheReaderHasPassed) {
  fs_->SetReadahead(1 * kMiB, 256 * kKiB, kWhole);
  // A reader slower than the disk: each chunk is in before it gets there.
  // The first read opens the window (and reads its first chunk itself).
  // Waiting for the whole chunk's read to return, not only for the next
  // block to be resident: pages that the reader thread's pread still holds
  // (copying them out) stay in the cache when the reader drops them.
  for (uint64_t offset = 0; offset < 3 * kMiB; offset += 64 * kKiB) {
    if (offset > 0 && offset % kMiB == 0) {
      ASSERT_TRUE(WaitPrefetched(offset)) << offset;
    }
    Read(offset, 64 * kKiB);
  }
  // Everything before the last read's page, in steps of 256 KiB, left the
  // cache; what is ahead of the reader is there.
  EXPECT_LE(Resident(0, 2 * kMiB), 256 * kKiB);
  EXPECT_TRUE(WaitResident(3 * kMiB, kMiB));
}

// The default file system, with every random-access file it opens wrapped
// by `wrap`: the file system under a PrefetchFileSystem in a test.
class FileWrappingFs : public rocksdb::FileSystemWrapper {
 public:
  using Wrap = std::function<std::unique_ptr<rocksdb::FSRandomAccessFile>(
      std::unique_ptr<rocksdb::FSRandomAccessFile>)>;
  explicit FileWrappingFs(Wrap wrap)
      : rocksdb::FileSystemWrapper(rocksdb::FileSystem::Default()), wrap_(std::move(wrap)) {}
  static const char* kClassName() { return "FileWrappingFs"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus NewRandomAccessFile(const std::string& fname,
                                        const rocksdb::FileOptions& options,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* result,
                                        rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->NewRandomAccessFile(fname, options, result, dbg);
    if (s.ok()) *result = wrap_(std::move(*result));
    return s;
  }

 private:
  const Wrap wrap_;
};

// The ranges files were asked to drop from the page cache, in order.
struct Drops {
  absl::Mutex mu;
  std::vector<std::pair<uint64_t, uint64_t>> ranges ABSL_GUARDED_BY(mu);
};

// A file that records its drops in `drops`.
class DropRecordingFile : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  DropRecordingFile(std::unique_ptr<rocksdb::FSRandomAccessFile> target, Drops* drops)
      : rocksdb::FSRandomAccessFileOwnerWrapper(std::move(target)), drops_(drops) {}
  rocksdb::IOStatus InvalidateCache(size_t offset, size_t length) override {
    {
      absl::MutexLock lock(&drops_->mu);
      drops_->ranges.emplace_back(offset, length);
    }
    return FSRandomAccessFileOwnerWrapper::InvalidateCache(offset, length);
  }

 private:
  Drops* const drops_;
};

TEST_F(PrefetchFsTest, DropsEveryFolioTheReaderHasPassedWhole) {
  // The page cache holds a file in folios of up to 2 MiB and keeps any that
  // a drop covers only in part (common/page_cache.h). Drops follow the
  // reader closely (a final merge has hundreds of readers), so one may end
  // inside a folio; a later one must then cover that folio whole: every 2
  // MiB unit the reader has passed lies inside one drop.
  Drops recorded;
  PrefetchFileSystem fs(std::make_shared<FileWrappingFs>([&](auto file) {
                          return std::make_unique<DropRecordingFile>(std::move(file), &recorded);
                        }),
                        /*readers=*/2);
  fs.SetReadahead(1 * kMiB, 256 * kKiB, kWhole);
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  ASSERT_TRUE(fs.NewRandomAccessFile(path_, rocksdb::FileOptions(), &file, nullptr).ok());
  file->Hint(rocksdb::FSRandomAccessFile::kRandom);
  // Blocks of a size that puts no read on a page boundary, up to 6.5 MiB.
  constexpr uint64_t kBlock = 100'003;
  std::vector<char> scratch(kBlock);
  uint64_t offset = 0;
  for (; offset < 6 * kMiB + kMiB / 2; offset += kBlock) {
    rocksdb::Slice result;
    ASSERT_TRUE(
        file->Read(offset, kBlock, rocksdb::IOOptions(), &result, scratch.data(), nullptr).ok());
  }
  std::vector<std::pair<uint64_t, uint64_t>> drops;
  {
    absl::MutexLock lock(&recorded.mu);
    drops = recorded.ranges;
  }
  ASSERT_FALSE(drops.empty());
  uint64_t end = 0;
  for (const auto& [from, length] : drops) {
    EXPECT_LE(from, end) << "a gap before " << from;
    end = std::max<uint64_t>(end, from + length);
  }
  // Close behind the reader (within a drop step of its last read's page)...
  EXPECT_GE(end + 256 * kKiB + 4096, offset - kBlock);
  // ...and every whole 2 MiB unit below the last drop's end in one drop.
  for (uint64_t unit = 0; unit + 2 * kMiB <= end; unit += 2 * kMiB) {
    bool whole = false;
    for (const auto& [from, length] : drops) {
      whole = whole || (from <= unit && unit + 2 * kMiB <= from + length);
    }
    EXPECT_TRUE(whole) << "the folio at " << unit;
  }
}

// Releasing behind: a reader that reads on from where it stopped releases
// what lies a lag behind it, in steps; reads that skip (a table's metadata,
// a seek) release nothing.
TEST_F(PrefetchFsTest, ReleasesWhatAReaderReadingOnHasPassed) {
  fs_->SetReadahead(1 * kMiB, 256 * kKiB, kWhole);
  absl::Mutex mu;
  std::vector<std::pair<uint64_t, uint64_t>> released;
  fs_->SetReleaseBehind(1 * kMiB, [&](const std::string& path, uint64_t offset, uint64_t length) {
    EXPECT_EQ(path, path_);
    absl::MutexLock lock(&mu);
    released.emplace_back(offset, length);
  });
  // Every other block: no read continues the previous one.
  for (uint64_t offset = 0; offset < kSize; offset += 128 * kKiB) Read(offset, 64 * kKiB);
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(released.empty());
  }
  // Block after block from the start: released from 0, contiguously, in
  // steps of at least 4 MiB, never closer than the lag to the last read.
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  ASSERT_TRUE(fs_->NewRandomAccessFile(path_, rocksdb::FileOptions(), &file, nullptr).ok());
  std::vector<char> scratch(64 * kKiB);
  for (uint64_t offset = 0; offset < kSize; offset += 64 * kKiB) {
    rocksdb::Slice result;
    ASSERT_TRUE(
        file->Read(offset, scratch.size(), rocksdb::IOOptions(), &result, scratch.data(), nullptr)
            .ok());
  }
  absl::MutexLock lock(&mu);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].first, 0u);
  EXPECT_GE(released[0].second, 4 * kMiB);
  EXPECT_LE(released[0].second, kSize - 64 * kKiB - kMiB);
}

TEST_F(PrefetchFsTest, OffUntilAReadaheadIsSet) {
  Read(0, 64 * kKiB);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_LE(Resident(0, kSize), 512 * kKiB);
  EXPECT_EQ(fs_->prefetched_bytes(), 0u);
}

TEST_F(PrefetchFsTest, OnlyTableFilesAreReadAhead) {
  const std::string other = dir_.File("MANIFEST-000001");
  std::filesystem::copy_file(path_, other);
  std::unique_ptr<rocksdb::FSRandomAccessFile> manifest;
  ASSERT_TRUE(fs_->NewRandomAccessFile(other, rocksdb::FileOptions(), &manifest, nullptr).ok());
  fs_->SetReadahead(1 * kMiB, 256 * kKiB, kWhole);
  std::vector<char> scratch(64 * kKiB);
  rocksdb::Slice result;
  ASSERT_TRUE(
      manifest->Read(0, scratch.size(), rocksdb::IOOptions(), &result, scratch.data(), nullptr)
          .ok());
  EXPECT_EQ(fs_->prefetched_bytes(), 0u);
}

// A file whose every read takes 2 ms, as a disk's would.
class SlowFile : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  using rocksdb::FSRandomAccessFileOwnerWrapper::FSRandomAccessFileOwnerWrapper;
  rocksdb::IOStatus Read(uint64_t offset, size_t n, const rocksdb::IOOptions& options,
                         rocksdb::Slice* result, char* scratch,
                         rocksdb::IODebugContext* dbg) const override {
    absl::SleepFor(absl::Milliseconds(2));
    return FSRandomAccessFileOwnerWrapper::Read(offset, n, options, result, scratch, dbg);
  }
};

TEST(PrefetchFsStallTest, ReadsThatWaitAreCountedWithTheirTime) {
  test_util::ScratchDir dir;
  const std::string path = dir.File("000001.sst");
  {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    std::vector<char> block(64 * kKiB, 'x');
    ASSERT_EQ(::write(fd, block.data(), block.size()), static_cast<ssize_t>(block.size()));
    ::close(fd);
  }
  PrefetchFileSystem fs(std::make_shared<FileWrappingFs>(
                            [](auto file) { return std::make_unique<SlowFile>(std::move(file)); }),
                        /*readers=*/1);
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  ASSERT_TRUE(fs.NewRandomAccessFile(path, rocksdb::FileOptions(), &file, nullptr).ok());
  EXPECT_EQ(fs.read_stalls().reads, 0u);
  std::vector<char> scratch(4 * kKiB);
  rocksdb::Slice result;
  for (uint64_t offset : {0u, 8192u, 16384u}) {
    ASSERT_TRUE(
        file->Read(offset, scratch.size(), rocksdb::IOOptions(), &result, scratch.data(), nullptr)
            .ok());
  }
  const PrefetchFileSystem::ReadStalls stalls = fs.read_stalls();
  EXPECT_EQ(stalls.reads, 3u);
  EXPECT_GE(stalls.seconds, 0.006);
  EXPECT_LT(stalls.seconds, 10.0);
}

}  // namespace
}  // namespace rocksort::store
