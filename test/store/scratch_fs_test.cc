#include "store/scratch_fs_internal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/listener.h"
#include "rocksdb/options.h"
#include "test_util.h"

namespace rocksort::store {
namespace {

// What reached the file system below: syncs of files and directories, and
// RangeSync calls.
struct SyncCounts {
  std::atomic<int> file_syncs{0};
  std::atomic<int> dir_syncs{0};
  std::atomic<int> range_syncs{0};
  std::atomic<int> invalidations{0};  // Readers' InvalidateCache calls.
  absl::Mutex mu;
  std::set<std::string> range_synced ABSL_GUARDED_BY(mu);  // File names.
};

class CountingFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  CountingFile(std::unique_ptr<rocksdb::FSWritableFile> target, std::string name,
               SyncCounts* counts)
      : rocksdb::FSWritableFileOwnerWrapper(std::move(target)),
        name_(std::move(name)),
        counts_(counts) {}
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* d) override {
    ++counts_->file_syncs;
    return FSWritableFileOwnerWrapper::Sync(o, d);
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* d) override {
    ++counts_->file_syncs;
    return FSWritableFileOwnerWrapper::Fsync(o, d);
  }
  rocksdb::IOStatus RangeSync(uint64_t offset, uint64_t nbytes, const rocksdb::IOOptions& o,
                              rocksdb::IODebugContext* d) override {
    ++counts_->range_syncs;
    {
      absl::MutexLock lock(&counts_->mu);
      counts_->range_synced.insert(name_);
    }
    return FSWritableFileOwnerWrapper::RangeSync(offset, nbytes, o, d);
  }

 private:
  const std::string name_;
  SyncCounts* const counts_;
};

class CountingReader : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  CountingReader(std::unique_ptr<rocksdb::FSRandomAccessFile> target, SyncCounts* counts)
      : rocksdb::FSRandomAccessFileOwnerWrapper(std::move(target)), counts_(counts) {}
  rocksdb::IOStatus InvalidateCache(size_t offset, size_t length) override {
    ++counts_->invalidations;
    return FSRandomAccessFileOwnerWrapper::InvalidateCache(offset, length);
  }

 private:
  SyncCounts* const counts_;
};

class CountingDirectory : public rocksdb::FSDirectoryWrapper {
 public:
  CountingDirectory(std::unique_ptr<rocksdb::FSDirectory> target, SyncCounts* counts)
      : rocksdb::FSDirectoryWrapper(std::move(target)), counts_(counts) {}
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* d) override {
    ++counts_->dir_syncs;
    return FSDirectoryWrapper::Fsync(o, d);
  }
  rocksdb::IOStatus FsyncWithDirOptions(const rocksdb::IOOptions& o, rocksdb::IODebugContext* d,
                                        const rocksdb::DirFsyncOptions& dir_options) override {
    ++counts_->dir_syncs;
    return FSDirectoryWrapper::FsyncWithDirOptions(o, d, dir_options);
  }

 private:
  SyncCounts* const counts_;
};

class CountingFileSystem : public rocksdb::FileSystemWrapper {
 public:
  explicit CountingFileSystem(SyncCounts* counts)
      : rocksdb::FileSystemWrapper(rocksdb::FileSystem::Default()), counts_(counts) {}
  const char* Name() const override { return "CountingFileSystem"; }
  rocksdb::IOStatus NewWritableFile(const std::string& fname, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->NewWritableFile(fname, options, result, dbg);
    if (s.ok()) *result = std::make_unique<CountingFile>(std::move(*result), fname, counts_);
    return s;
  }
  rocksdb::IOStatus NewRandomAccessFile(const std::string& fname,
                                        const rocksdb::FileOptions& options,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* result,
                                        rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->NewRandomAccessFile(fname, options, result, dbg);
    if (s.ok()) *result = std::make_unique<CountingReader>(std::move(*result), counts_);
    return s;
  }
  rocksdb::IOStatus NewDirectory(const std::string& name, const rocksdb::IOOptions& options,
                                 std::unique_ptr<rocksdb::FSDirectory>* result,
                                 rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->NewDirectory(name, options, result, dbg);
    if (s.ok()) *result = std::make_unique<CountingDirectory>(std::move(*result), counts_);
    return s;
  }

 private:
  SyncCounts* const counts_;
};

// Records the tables flushes wrote.
class FlushedTables : public rocksdb::EventListener {
 public:
  void OnFlushCompleted(rocksdb::DB* /*db*/, const rocksdb::FlushJobInfo& info) override {
    absl::MutexLock lock(&mu_);
    paths_.insert(info.file_path);
  }
  std::set<std::string> paths() {
    absl::MutexLock lock(&mu_);
    return paths_;
  }

 private:
  absl::Mutex mu_;
  std::set<std::string> paths_ ABSL_GUARDED_BY(mu_);
};

// Creates a database through `fs` with `listeners`, writes two runs with
// bytes_per_sync set, merges them, closes it and checks that it reads back.
void WriteFlushMergeAndRead(const std::shared_ptr<rocksdb::FileSystem>& fs, const std::string& dir,
                            std::vector<std::shared_ptr<rocksdb::EventListener>> listeners = {}) {
  std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
  rocksdb::Options options;
  options.listeners = std::move(listeners);
  options.env = env.get();
  options.create_if_missing = true;
  options.bytes_per_sync = 64 * 1024;
  options.compression = rocksdb::kNoCompression;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, dir, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::WriteOptions write_options;
  write_options.disableWAL = true;
  const std::string value(1000, 'v');
  // Runs of 3 MB: RocksDB starts writeback (RangeSync) only 1 MiB behind
  // what it has written.
  for (int run = 0; run < 2; ++run) {
    for (int i = 0; i < 3000; ++i) {
      ASSERT_TRUE(db->Put(write_options, std::to_string(run * 3000 + i), value).ok());
    }
    ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
  }
  ASSERT_TRUE(db->CompactRange(rocksdb::CompactRangeOptions(), nullptr, nullptr).ok());
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  int records = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++records;
  EXPECT_TRUE(it->status().ok());
  EXPECT_EQ(records, 6000);
  it.reset();
  ASSERT_TRUE(db->Close().ok());
}

// The control: RocksDB syncs runs, the MANIFEST and the directory.
TEST(ScratchFsTest, RocksDbSyncsWithoutIt) {
  test_util::ScratchDir dir;
  SyncCounts counts;
  WriteFlushMergeAndRead(std::make_shared<CountingFileSystem>(&counts), dir.File("db"));
  EXPECT_GT(counts.file_syncs.load(), 0);
  EXPECT_GT(counts.dir_syncs.load(), 0);
  EXPECT_GT(counts.range_syncs.load(), 0);
}

TEST(ScratchFsTest, NothingIsSyncedButWritebackStillStartsEarly) {
  test_util::ScratchDir dir;
  SyncCounts counts;
  WriteFlushMergeAndRead(
      std::make_shared<ScratchFileSystem>(std::make_shared<CountingFileSystem>(&counts)),
      dir.File("db"));
  EXPECT_EQ(counts.file_syncs.load(), 0);
  EXPECT_EQ(counts.dir_syncs.load(), 0);
  EXPECT_GT(counts.range_syncs.load(), 0);
}

// With the listener enabled, the flushed runs are never written back
// early; the merged run still is.
TEST(ScratchFsTest, FlushedRunsAreNotWrittenBackEarlyWhenDeferred) {
  for (const bool enabled : {false, true}) {
    SCOPED_TRACE(enabled ? "deferred" : "not deferred");
    test_util::ScratchDir dir;
    SyncCounts counts;
    auto fs = std::make_shared<ScratchFileSystem>(std::make_shared<CountingFileSystem>(&counts));
    auto deferring = std::make_shared<FreshRunListener>(fs);
    deferring->set_enabled(enabled);
    auto flushed = std::make_shared<FlushedTables>();
    WriteFlushMergeAndRead(fs, dir.File("db"), {deferring, flushed});
    const std::set<std::string> flushed_paths = flushed->paths();
    ASSERT_EQ(flushed_paths.size(), 2u);
    absl::MutexLock lock(&counts.mu);
    int flushed_synced = 0;
    int others_synced = 0;  // The merged run.
    for (const std::string& name : counts.range_synced) {
      if (!absl::EndsWith(name, ".sst")) continue;
      (flushed_paths.count(name) > 0 ? flushed_synced : others_synced)++;
    }
    EXPECT_EQ(flushed_synced, enabled ? 0 : 2);
    EXPECT_EQ(others_synced, 1);
  }
}

// Dropping a deferred run's pages from the cache would write them back
// first (POSIX_FADV_DONTNEED on dirty pages): its readers do not drop them,
// other files' readers do.
TEST(ScratchFsTest, ReadersOfDeferredRunsKeepThemInTheCache) {
  test_util::ScratchDir dir;
  SyncCounts counts;
  ScratchFileSystem fs(std::make_shared<CountingFileSystem>(&counts));
  const std::string fresh = dir.File("000011.sst");
  const std::string merged = dir.File("000012.sst");
  fs.DeferWriteback(fresh);
  for (const std::string& name : {fresh, merged}) {
    std::unique_ptr<rocksdb::FSWritableFile> out;
    ASSERT_TRUE(fs.NewWritableFile(name, rocksdb::FileOptions(), &out, nullptr).ok());
    ASSERT_TRUE(out->Append(std::string(8192, 'r'), rocksdb::IOOptions(), nullptr).ok());
    ASSERT_TRUE(out->Close(rocksdb::IOOptions(), nullptr).ok());
  }
  for (const auto& [name, invalidations] : {std::pair<std::string, int>{fresh, 0}, {merged, 1}}) {
    counts.invalidations = 0;
    std::unique_ptr<rocksdb::FSRandomAccessFile> in;
    ASSERT_TRUE(fs.NewRandomAccessFile(name, rocksdb::FileOptions(), &in, nullptr).ok());
    EXPECT_TRUE(in->InvalidateCache(0, 8192).ok());
    EXPECT_EQ(counts.invalidations.load(), invalidations) << name;
  }
  EXPECT_TRUE(fs.DeleteFile(fresh, rocksdb::IOOptions(), nullptr).ok());
  fs.WaitForDeletes();
  EXPECT_FALSE(std::filesystem::exists(fresh));
}

// The runs' writes with O_DIRECT are counted and timed (how fast the disk
// takes runs); buffered writes, copies into the page cache, are not.
TEST(ScratchFsTest, DirectWritesOfTablesAreMeasured) {
  for (const bool direct : {false, true}) {
    SCOPED_TRACE(direct);
    test_util::ScratchDir dir;
    auto fs = std::make_shared<ScratchFileSystem>(rocksdb::FileSystem::Default());
    std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
    rocksdb::Options options;
    options.env = env.get();
    options.create_if_missing = true;
    options.use_direct_io_for_flush_and_compaction = direct;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir.File("db"), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    rocksdb::WriteOptions write_options;
    write_options.disableWAL = true;
    const std::string value(1000, 'v');
    for (int i = 0; i < 3000; ++i) {
      ASSERT_TRUE(db->Put(write_options, std::to_string(i), value).ok());
    }
    ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
    std::vector<rocksdb::LiveFileMetaData> tables;
    db->GetLiveFilesMetaData(&tables);
    ASSERT_EQ(tables.size(), 1u);
    const ScratchFileSystem::DirectWrites writes = fs->direct_writes();
    if (direct) {
      // Whole sectors: the table's last one padded.
      EXPECT_GE(writes.bytes, tables[0].size);
      EXPECT_LT(writes.bytes, tables[0].size + 1024 * 1024);
      EXPECT_GT(writes.seconds, 0);
    } else {
      EXPECT_EQ(writes.bytes, 0u);
      EXPECT_EQ(writes.seconds, 0);
    }
    ASSERT_TRUE(db->Close().ok());
  }
}

TEST(ScratchFsTest, TablesAreDeletedInTheBackgroundOthersAtOnce) {
  test_util::ScratchDir dir;
  ScratchFileSystem fs(rocksdb::FileSystem::Default());
  std::vector<std::string> tables;
  for (int i = 0; i < 20; ++i) {
    tables.push_back(dir.File(absl::StrCat(i, ".sst")));
    std::ofstream(tables.back()) << std::string(100000, 'x');
  }
  const std::string manifest = dir.File("MANIFEST-000001");
  std::ofstream(manifest) << "m";
  for (const std::string& table : tables) {
    EXPECT_TRUE(fs.DeleteFile(table, rocksdb::IOOptions(), nullptr).ok());
  }
  EXPECT_TRUE(fs.DeleteFile(manifest, rocksdb::IOOptions(), nullptr).ok());
  EXPECT_FALSE(std::filesystem::exists(manifest));
  fs.WaitForDeletes();
  for (const std::string& table : tables) EXPECT_FALSE(std::filesystem::exists(table)) << table;
  // A table that is not there is reported as the unlink would report it.
  EXPECT_TRUE(
      fs.DeleteFile(dir.File("missing.sst"), rocksdb::IOOptions(), nullptr).IsPathNotFound());
}

// A released range becomes a hole (its blocks freed, the size and the rest
// of the file kept); one still pending when its file is deleted is dropped.
TEST(ScratchFsTest, ReleasedRangesBecomeHoles) {
  test_util::ScratchDir dir;
  const std::string table = dir.File("000009.sst");
  std::ofstream(table) << std::string(4 << 20, 'x');
  struct stat before;
  ASSERT_EQ(::stat(table.c_str(), &before), 0);
  ScratchFileSystem fs(rocksdb::FileSystem::Default());
  fs.ReleaseRange(table, 0, 3 << 20);
  fs.WaitForDeletes();
  struct stat after;
  ASSERT_EQ(::stat(table.c_str(), &after), 0);
  EXPECT_EQ(after.st_size, before.st_size);
  if (fs.released_bytes() == 0) GTEST_SKIP() << "this filesystem cannot punch holes";
  EXPECT_EQ(fs.released_bytes(), 3u << 20);
  EXPECT_LE(after.st_blocks * 512, before.st_blocks * 512 - (3 << 20));
  std::ifstream in(table);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, std::string(3 << 20, '\0') + std::string(1 << 20, 'x'));
  // Released or deleted, whichever comes first: nothing is left either way.
  fs.ReleaseRange(table, 3 << 20, 1 << 20);
  EXPECT_TRUE(fs.DeleteFile(table, rocksdb::IOOptions(), nullptr).ok());
  fs.WaitForDeletes();
  EXPECT_FALSE(std::filesystem::exists(table));
}

// Pages of `path` in the page cache (mincore), -1 if it cannot be mapped.
long ResidentPages(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return -1;
  const off_t size = ::lseek(fd, 0, SEEK_END);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return -1;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec((size + page - 1) / page);
  const int rc = ::mincore(map, size, vec.data());
  ::munmap(map, size);
  if (rc != 0) return -1;
  long resident = 0;
  for (unsigned char v : vec) resident += v & 1;
  return resident;
}

// A written-back run's pages leave the cache; its contents stay.
TEST(ScratchFsTest, DropCachedPagesEmptiesTheCacheOfAFile) {
  test_util::ScratchDir dir;
  const std::string table = dir.File("000021.sst");
  const std::string content(4 << 20, 'd');
  {
    const int fd = ::open(table.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
    ASSERT_EQ(::fdatasync(fd), 0);  // Clean pages: dropping them needs no writeback.
    ::close(fd);
  }
  const long before = ResidentPages(table);
  if (before <= 0) GTEST_SKIP() << "no page cache to observe";
  EXPECT_TRUE(ScratchFileSystem::DropCachedPages(table));
  struct statfs fs_info;
  ASSERT_EQ(::statfs(table.c_str(), &fs_info), 0);
  if (fs_info.f_type == TMPFS_MAGIC) GTEST_SKIP() << "tmpfs pages are the file itself";
  EXPECT_EQ(ResidentPages(table), 0);
  std::ifstream in(table);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()),
            content);
  EXPECT_FALSE(ScratchFileSystem::DropCachedPages(dir.File("missing.sst")));
}

TEST(ScratchFsTest, PendingDeletesFinishBeforeTheFileSystemGoes) {
  test_util::ScratchDir dir;
  const std::string table = dir.File("000007.sst");
  std::ofstream(table) << std::string(100000, 'x');
  {
    ScratchFileSystem fs(rocksdb::FileSystem::Default());
    EXPECT_TRUE(fs.DeleteFile(table, rocksdb::IOOptions(), nullptr).ok());
  }
  EXPECT_FALSE(std::filesystem::exists(table));
}

}  // namespace
}  // namespace rocksort::store
