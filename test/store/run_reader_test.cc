#include "store/run_reader_internal.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "rocksdb/sst_file_writer.h"
#include "rocksdb/table.h"
#include "store/options_plan_internal.h"
#include "test_util.h"

namespace rocksort::store {
namespace {

using Entries = std::map<std::string, std::string>;

// Keys as the store's are: a shared head (so that blocks prefix-compress
// them), then distinct bytes; values from a few bytes to several blocks.
std::string Key(std::mt19937_64& rng, int i) {
  std::string key = "\x01\x02head";
  const uint64_t r = rng();
  key.append(reinterpret_cast<const char*>(&r), 1 + r % 8);
  key += absl::StrCat("#", i);
  return key;
}

std::string Value(std::mt19937_64& rng, int i) {
  const size_t size = i % 997 == 0 ? 150 * 1024 : rng() % 700;
  std::string value(size, '\0');
  for (size_t j = 0; j < size; ++j) value[j] = "ACGT"[(rng() >> (j % 60)) & 3];
  return value;
}

Entries MakeEntries(uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  Entries entries;
  for (int i = 0; i < n; ++i) entries.emplace(Key(rng, i), Value(rng, i));
  return entries;
}

// The store's own options (table format, checksum, block size) with
// `compression`.
rocksdb::Options RunOptions(RunCompression compression) {
  PolicyInput input;
  input.memory_budget = 64 << 20;
  input.threads = 2;
  input.run_compression = compression;
  // The plan's compression for runs that reach the final merge (fresh runs
  // merged while loading are written uncompressed).
  const SortPlan plan = MakePlan(input);
  rocksdb::Options options = plan.options;
  options.compression = plan.merged_compression;
  return options;
}

void WriteRun(const std::string& path, const Entries& entries, const rocksdb::Options& options,
              const std::string& deleted_key = "") {
  rocksdb::SstFileWriter writer(rocksdb::EnvOptions(), options);
  ASSERT_TRUE(writer.Open(path).ok());
  for (const auto& [key, value] : entries) {
    if (key == deleted_key) {
      ASSERT_TRUE(writer.Delete(key).ok());
    } else {
      ASSERT_TRUE(writer.Put(key, value).ok());
    }
  }
  ASSERT_TRUE(writer.Finish().ok());
}

std::unique_ptr<RunCursor> OpenRun(const std::string& path) {
  absl::StatusOr<std::unique_ptr<RunCursor>> cursor =
      RunCursor::Open(rocksdb::FileSystem::Default().get(), path);
  EXPECT_TRUE(cursor.ok()) << cursor.status();
  return cursor.ok() ? std::move(*cursor) : nullptr;
}

// Reads the rest of `cursor`, which must be exactly `entries`, in order.
void ExpectReadsInOrder(SortedCursor& cursor, const Entries& entries) {
  auto expected = entries.begin();
  while (cursor.Next()) {
    ASSERT_NE(expected, entries.end());
    ASSERT_EQ(cursor.key(), expected->first);
    ASSERT_EQ(cursor.value(), expected->second);
    ++expected;
  }
  EXPECT_TRUE(cursor.status().ok()) << cursor.status();
  EXPECT_EQ(expected, entries.end());
}

class RunCursorTest : public ::testing::TestWithParam<RunCompression> {
 protected:
  test_util::ScratchDir dir_;
};

TEST_P(RunCursorTest, ReadsEveryEntryOfARunInOrder) {
  const Entries entries = MakeEntries(7, 20000);
  const std::string path = dir_.File("000010.sst");
  WriteRun(path, entries, RunOptions(GetParam()));
  std::unique_ptr<RunCursor> cursor = OpenRun(path);
  ASSERT_NE(cursor, nullptr);
  EXPECT_GT(cursor->blocks(), 50u);  // Many blocks, some longer than one.
  ExpectReadsInOrder(*cursor, entries);
  EXPECT_FALSE(cursor->Next());
}

INSTANTIATE_TEST_SUITE_P(EveryRunCompression, RunCursorTest,
                         ::testing::Values(RunCompression::kLz4, RunCompression::kSnappy,
                                           RunCompression::kZstd, RunCompression::kNone));

// The store's index blocks hold a full handle per entry (restart interval
// 1); between restart points an index holds only each size's difference.
TEST(RunCursor, ReadsAnIndexWithDeltaEncodedHandles) {
  test_util::ScratchDir dir;
  const Entries entries = MakeEntries(9, 5000);
  rocksdb::Options options = RunOptions(RunCompression::kLz4);
  rocksdb::BlockBasedTableOptions table =
      *options.table_factory->GetOptions<rocksdb::BlockBasedTableOptions>();
  table.index_block_restart_interval = 4;
  table.block_size = 4096;
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  const std::string path = dir.File("000014.sst");
  WriteRun(path, entries, options);
  std::unique_ptr<RunCursor> cursor = OpenRun(path);
  ASSERT_NE(cursor, nullptr);
  EXPECT_GT(cursor->blocks(), 100u);
  ExpectReadsInOrder(*cursor, entries);
}

// An index longer than the tail read with the footer is read on its own.
TEST(RunCursor, ReadsAnIndexLargerThanTheTailReadWithTheFooter) {
  test_util::ScratchDir dir;
  const Entries entries = MakeEntries(4, 20000);
  rocksdb::Options options = RunOptions(RunCompression::kNone);
  rocksdb::BlockBasedTableOptions table =
      *options.table_factory->GetOptions<rocksdb::BlockBasedTableOptions>();
  table.block_size = 64;  // About a block per entry: an index of ~500 KiB.
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  const std::string path = dir.File("000015.sst");
  WriteRun(path, entries, options);
  std::unique_ptr<RunCursor> cursor = OpenRun(path);
  ASSERT_NE(cursor, nullptr);
  EXPECT_GT(cursor->blocks(), 15000u);
  size_t read = 0;
  while (cursor->Next()) ++read;
  EXPECT_TRUE(cursor->status().ok()) << cursor->status();
  EXPECT_EQ(read, entries.size());
}

TEST(RunIndexCache, GivesAnIndexOnceAndOnlyForTheSameFileSize) {
  test_util::ScratchDir dir;
  const std::string path = dir.File("000016.sst");
  WriteRun(path, MakeEntries(6, 3000), RunOptions(RunCompression::kLz4));
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  ASSERT_TRUE(rocksdb::FileSystem::Default()
                  ->NewRandomAccessFile(path, rocksdb::FileOptions(), &file, nullptr)
                  .ok());
  const uint64_t size = std::filesystem::file_size(path);
  absl::StatusOr<RunIndex> index = ReadRunIndex(file.get(), path, size);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_GT(index->blocks.size(), 10u);

  RunIndexCache cache;
  cache.Add(path, *index);
  // Keyed by the file's name: the path may be spelled differently.
  EXPECT_FALSE(cache.Take("/elsewhere/000016.sst", size + 1).has_value());
  EXPECT_EQ(cache.size(), 0u);  // A stale entry goes too.
  cache.Add(path, *index);
  std::optional<RunIndex> taken = cache.Take("/elsewhere/000016.sst", size);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->blocks.size(), index->blocks.size());
  EXPECT_FALSE(cache.Take(path, size).has_value());
  cache.Add(path, *index);
  cache.Remove(path);
  EXPECT_EQ(cache.size(), 0u);

  // A cursor with the cached index reads the run without reading its index.
  cache.Add(path, *index);
  bool read_again = false;
  absl::StatusOr<std::unique_ptr<RunCursor>> cursor =
      RunCursor::Open(rocksdb::FileSystem::Default().get(), path, &cache, &read_again);
  ASSERT_TRUE(cursor.ok()) << cursor.status();
  EXPECT_FALSE(read_again);
  cursor = RunCursor::Open(rocksdb::FileSystem::Default().get(), path, &cache, &read_again);
  ASSERT_TRUE(cursor.ok());
  EXPECT_TRUE(read_again);  // Taken before: read from the file.
  int n = 0;
  while ((*cursor)->Next()) ++n;
  EXPECT_EQ(n, 3000);
}

TEST(RunCursor, CorruptBlockFailsWithItsFileAndOffset) {
  test_util::ScratchDir dir;
  const std::string path = dir.File("000011.sst");
  WriteRun(path, MakeEntries(3, 2000), RunOptions(RunCompression::kLz4));
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(100);
    file.put('\xff');  // Inside the first data block.
  }
  std::unique_ptr<RunCursor> cursor = OpenRun(path);
  ASSERT_NE(cursor, nullptr);
  EXPECT_FALSE(cursor->Next());
  EXPECT_EQ(cursor->status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(cursor->status().message().find(path), absl::string_view::npos);
  EXPECT_NE(cursor->status().message().find("checksum mismatch in the block at offset 0"),
            absl::string_view::npos)
      << cursor->status();
}

TEST(RunCursor, FileThatIsNotATableFailsToOpen) {
  test_util::ScratchDir dir;
  const std::string path = dir.File("000012.sst");
  std::ofstream(path) << std::string(4096, 'x');
  absl::StatusOr<std::unique_ptr<RunCursor>> cursor =
      RunCursor::Open(rocksdb::FileSystem::Default().get(), path);
  ASSERT_FALSE(cursor.ok());
  EXPECT_EQ(cursor.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(cursor.status().message().find(path), absl::string_view::npos);
  EXPECT_NE(cursor.status().message().find("bad magic number"), absl::string_view::npos);
}

// A footer whose index handle would wrap around 2^64 (offset + size) is
// refused, not read past the tail it was read with.
TEST(RunCursor, FooterIndexHandleThatWrapsIsCorrupt) {
  test_util::ScratchDir dir;
  const std::string path = dir.File("000017.sst");
  WriteRun(path, MakeEntries(8, 500), RunOptions(RunCompression::kLz4));
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // Footer (format 5): checksum type, metaindex and index handles as
  // varints, padding up to the version at byte 41, then the magic number.
  ASSERT_GE(bytes.size(), 53u);
  const size_t footer = bytes.size() - 53;
  size_t at = footer + 1;
  for (int varints = 0; varints < 2; ++varints) {  // Keep the metaindex handle.
    while (static_cast<uint8_t>(bytes[at]) & 0x80) ++at;
    ++at;
  }
  std::string handles = bytes.substr(footer + 1, at - footer - 1);
  auto put_varint = [&handles](uint64_t v) {
    for (; v >= 0x80; v >>= 7) handles.push_back(static_cast<char>(v | 0x80));
    handles.push_back(static_cast<char>(v));
  };
  put_varint(~uint64_t{0} - 7);  // Offset: 2^64 - 8.
  put_varint(8);                 // Size: with the trailer the sum wraps to 5.
  ASSERT_LE(handles.size(), 40u);
  handles.resize(40, '\0');
  bytes.replace(footer + 1, 40, handles);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;

  absl::StatusOr<std::unique_ptr<RunCursor>> cursor =
      RunCursor::Open(rocksdb::FileSystem::Default().get(), path);
  ASSERT_FALSE(cursor.ok());
  EXPECT_EQ(cursor.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(cursor.status().message().find(path), absl::string_view::npos);
  EXPECT_NE(cursor.status().message().find("bad index handle in the footer"),
            absl::string_view::npos)
      << cursor.status();
}

TEST(RunCursor, EntryThatIsNotAValueIsAnError) {
  test_util::ScratchDir dir;
  const std::string path = dir.File("000013.sst");
  const Entries entries = MakeEntries(5, 100);
  const std::string deleted = std::next(entries.begin(), 40)->first;
  WriteRun(path, entries, RunOptions(RunCompression::kNone), deleted);
  std::unique_ptr<RunCursor> cursor = OpenRun(path);
  ASSERT_NE(cursor, nullptr);
  int read = 0;
  while (cursor->Next()) ++read;
  EXPECT_EQ(read, 40);
  EXPECT_EQ(cursor->status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(cursor->status().message().find("is not a value"), absl::string_view::npos);
}

// Runs of the given sizes, their keys drawn from one sorted set so that
// they interleave; the merge must give back exactly the set, in order.
void ExpectMergeOf(const std::vector<int>& sizes, bool start_first = false) {
  test_util::ScratchDir dir;
  int total = 0;
  for (int size : sizes) total += size;
  const Entries all = MakeEntries(11, total);
  std::vector<Entries> runs(sizes.size());
  std::mt19937_64 rng(13);
  std::vector<int> owner;
  for (size_t r = 0; r < sizes.size(); ++r) owner.insert(owner.end(), sizes[r], r);
  std::shuffle(owner.begin(), owner.end(), rng);
  int i = 0;
  for (const auto& [key, value] : all) runs[owner[i++]].emplace(key, value);
  std::vector<std::unique_ptr<SortedCursor>> cursors;
  for (size_t r = 0; r < runs.size(); ++r) {
    const std::string path = dir.File(absl::StrCat(100 + r, ".sst"));
    WriteRun(path, runs[r], RunOptions(r % 2 ? RunCompression::kLz4 : RunCompression::kNone));
    cursors.push_back(OpenRun(path));
    ASSERT_NE(cursors.back(), nullptr);
  }
  RunMerger merger(std::move(cursors), /*readahead=*/4096);
  if (start_first) {
    ASSERT_TRUE(merger.Start().ok());
  }
  auto expected = all.begin();
  absl::string_view value;
  while (merger.Next(&value)) {
    ASSERT_NE(expected, all.end());
    ASSERT_EQ(value, expected->second) << "record " << std::distance(all.begin(), expected);
    ++expected;
  }
  EXPECT_TRUE(merger.status().ok()) << merger.status();
  EXPECT_EQ(expected, all.end());
  EXPECT_FALSE(merger.Next(&value));
  EXPECT_EQ(merger.readahead(), 4096u);
}

TEST(RunMerger, MergesOneRun) { ExpectMergeOf({500}); }
TEST(RunMerger, MergesTwoRuns) { ExpectMergeOf({300, 700}); }
TEST(RunMerger, MergesRunsOfVeryDifferentSizes) { ExpectMergeOf({1, 2000, 3, 1, 400}); }
TEST(RunMerger, MergesManyRuns) { ExpectMergeOf(std::vector<int>(37, 60)); }
TEST(RunMerger, StartedMergeGivesEveryRecordFromTheFirst) {
  ExpectMergeOf({40, 1, 300}, /*start_first=*/true);
}

TEST(RunMerger, NoRunsIsAnEmptyMerge) {
  RunMerger merger({}, 0);
  absl::string_view value;
  EXPECT_FALSE(merger.Next(&value));
  EXPECT_TRUE(merger.status().ok());
}

// A DB of the store's options with `flushed` written and flushed into a
// run, then `open` left in its open memtable, whose writes are finished.
struct DbWithMemtable {
  DbWithMemtable(const std::string& path, const Entries& flushed, const Entries& open) {
    PolicyInput input;
    input.memory_budget = 64 << 20;
    input.threads = 1;
    const SortPlan plan = MakePlan(input);
    rocksdb::DB* raw = nullptr;
    const rocksdb::Status s = rocksdb::DB::Open(plan.options, path, &raw);
    EXPECT_TRUE(s.ok()) << s.ToString();
    db.reset(raw);
    rocksdb::WriteOptions write;
    write.disableWAL = true;
    for (const auto& [key, value] : flushed) EXPECT_TRUE(db->Put(write, key, value).ok());
    EXPECT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
    for (const auto& [key, value] : open) EXPECT_TRUE(db->Put(write, key, value).ok());
    plan.memtable_factory->FinishWrites();
  }
  std::unique_ptr<MemtableCursor> Memtables() const {
    rocksdb::ReadOptions read;
    read.read_tier = rocksdb::kMemtableTier;
    return std::make_unique<MemtableCursor>(
        std::unique_ptr<rocksdb::Iterator>(db->NewIterator(read)), "the test lane");
  }
  std::unique_ptr<rocksdb::DB> db;
};

TEST(MemtableCursor, ReadsTheMemtablesOnlyInOrder) {
  test_util::ScratchDir dir;
  const DbWithMemtable db(dir.File("db"), MakeEntries(3, 2000), MakeEntries(4, 3000));
  std::unique_ptr<MemtableCursor> memtables = db.Memtables();
  ExpectReadsInOrder(*memtables, MakeEntries(4, 3000));
  EXPECT_FALSE(memtables->Next());
}

TEST(RunMerger, MergesRunsWithMemtables) {
  test_util::ScratchDir dir;
  const Entries all = MakeEntries(5, 9000);
  Entries on_disk;
  Entries in_memory;
  int i = 0;
  for (const auto& [key, value] : all) (i++ % 3 == 0 ? in_memory : on_disk).emplace(key, value);
  const std::string run = dir.File("000030.sst");
  WriteRun(run, on_disk, RunOptions(RunCompression::kLz4));
  const DbWithMemtable db(dir.File("db"), MakeEntries(6, 100), in_memory);
  std::vector<std::unique_ptr<SortedCursor>> cursors;
  cursors.push_back(OpenRun(run));
  cursors.push_back(db.Memtables());
  RunMerger merger(std::move(cursors), 0);
  auto expected = all.begin();
  absl::string_view value;
  while (merger.Next(&value)) {
    ASSERT_NE(expected, all.end());
    ASSERT_EQ(value, expected->second);
    ++expected;
  }
  EXPECT_TRUE(merger.status().ok()) << merger.status();
  EXPECT_EQ(expected, all.end());
}

TEST(RunMerger, FailsWithTheFailingRunsError) {
  test_util::ScratchDir dir;
  const std::string good = dir.File("000020.sst");
  const std::string bad = dir.File("000021.sst");
  WriteRun(good, MakeEntries(1, 3000), RunOptions(RunCompression::kLz4));
  WriteRun(bad, MakeEntries(2, 3000), RunOptions(RunCompression::kLz4));
  std::vector<std::unique_ptr<SortedCursor>> cursors;
  cursors.push_back(OpenRun(good));
  cursors.push_back(OpenRun(bad));
  {
    std::fstream file(bad, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(200 * 1024);  // A later data block.
    file.put('\xff');
  }
  RunMerger merger(std::move(cursors), 0);
  absl::string_view value;
  int read = 0;
  while (merger.Next(&value)) ++read;
  EXPECT_GT(read, 0);
  EXPECT_LT(read, 6000);
  EXPECT_EQ(merger.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(merger.status().message().find(bad), absl::string_view::npos) << merger.status();
}

}  // namespace
}  // namespace rocksort::store
