#include "store/store.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "record/record.h"
#include "test_util.h"

namespace rocksort::store {
namespace {

using ::rocksort::test_util::ScratchDir;

// A stored record whose only job is to carry `payload` (as its read name,
// which is what ReadBack returns).
record::EncodedRecord Payload(const std::string& payload, std::string* storage) {
  // block_size + 32 fixed bytes, then the NUL-terminated name.
  storage->assign(36, '\0');
  const uint32_t block_size = 32 + static_cast<uint32_t>(payload.size()) + 1;
  std::memcpy(storage->data(), &block_size, 4);
  (*storage)[12] = static_cast<char>(payload.size() + 1);
  *storage += payload;
  *storage += '\0';
  record::EncodedRecord r;
  r.parts[0] = *storage;
  r.num_parts = 1;
  r.total_size = storage->size();
  return r;
}

StoreOptions SmallStore(const ScratchDir& dir) {
  StoreOptions o;
  o.memory_budget = 1 << 20;  // 256 KiB memtables.
  o.threads = 2;              // Two lanes.
  o.allow_compaction = false;
  o.disk = DiskKind::kSsd;
  o.dir_prefix = dir.File("rocksort.");
  return o;
}

// Adds `n` records with random 12-byte keys, committing every `batch`.
std::vector<std::string> Fill(TempStore& store, int n, int batch) {
  std::mt19937_64 rng(7);
  std::vector<std::string> keys;
  std::string storage;
  for (int i = 0; i < n; ++i) {
    const std::string key = absl::StrFormat("%012x", rng() & 0xffffffffffffULL);
    keys.push_back(key);
    EXPECT_TRUE(store.Add(key, Payload(key + std::string(80, 'x'), &storage)).ok());
    if ((i + 1) % batch == 0) {
      EXPECT_TRUE(store.CommitBatch().ok());
    }
  }
  EXPECT_TRUE(store.CommitBatch().ok());
  return keys;
}

std::vector<std::string> ReadBack(TempStore& store) {
  std::vector<std::string> keys;
  absl::StatusOr<std::unique_ptr<SortedReader>> reader = store.NewReader();
  EXPECT_TRUE(reader.ok()) << reader.status();
  absl::string_view value;
  while ((*reader)->Next(&value)) {
    keys.push_back(std::string(record::RecordView(value).qname().substr(0, 12)));
  }
  EXPECT_TRUE((*reader)->status().ok()) << (*reader)->status();
  return keys;
}

TEST(TempStoreTest, ReadsBackEveryRecordInKeyOrderAcrossLanesAndRuns) {
  ScratchDir dir;
  absl::StatusOr<std::unique_ptr<TempStore>> store = TempStore::Create(SmallStore(dir));
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<std::string> keys = Fill(**store, 30000, 200);
  ASSERT_TRUE((*store)->FinishLoading().ok());
  const StoreReport report = (*store)->report();
  // ~4 MB in 256 KiB memtables over two lanes: both lanes got several runs.
  ASSERT_EQ(report.runs_after_load_per_lane.size(), 2u);
  EXPECT_GE(report.runs_after_load_per_lane[0], 3);
  EXPECT_GE(report.runs_after_load_per_lane[1], 3);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(ReadBack(**store), keys);
  // Every run's index was read as the run was written, none at the end.
  EXPECT_EQ((*store)->report().final_index_reads, 0);
  EXPECT_TRUE((*store)->Destroy().ok());
  EXPECT_TRUE(dir.List().empty());
}

// Memtables of 256 MiB or more (a budget of 1 GiB over two threads, the
// size known): the final merge reads what loading left in them from
// memory, and nothing is written.
TEST(TempStoreTest, TheFinalMergeReadsLargeMemtablesFromMemory) {
  ScratchDir dir;
  StoreOptions options = SmallStore(dir);
  options.memory_budget = uint64_t{1} << 30;
  options.size_hint = uint64_t{4} << 30;
  options.allow_compaction = true;
  absl::StatusOr<std::unique_ptr<TempStore>> store = TempStore::Create(options);
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<std::string> keys = Fill(**store, 20000, 500);
  ASSERT_TRUE((*store)->FinishLoading().ok());
  const StoreReport report = (*store)->report();
  EXPECT_EQ(report.runs_flushed, 0);
  EXPECT_EQ(report.runs_merged(), 0);
  // Lanes take turns by run: no memtable was sealed, so one lane holds all.
  EXPECT_EQ(report.memtables_at_final_merge, 1);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(ReadBack(**store), keys);
  EXPECT_TRUE((*store)->Destroy().ok());
  EXPECT_TRUE(dir.List().empty());
}

// Smaller memtables are flushed at the end of loading, and read back.
TEST(TempStoreTest, SmallMemtablesAreFlushedForTheFinalMerge) {
  ScratchDir dir;
  StoreOptions options = SmallStore(dir);
  options.memory_budget = uint64_t{64} << 20;
  absl::StatusOr<std::unique_ptr<TempStore>> store = TempStore::Create(options);
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<std::string> keys = Fill(**store, 2000, 500);
  ASSERT_TRUE((*store)->FinishLoading().ok());
  const StoreReport report = (*store)->report();
  EXPECT_EQ(report.memtables_at_final_merge, 0);
  EXPECT_EQ(report.runs_flushed, 1);
  EXPECT_EQ(report.runs_merged(), 1);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(ReadBack(**store), keys);
}

TEST(TempStoreTest, TinyMemoryMergesDownToWhatTheFinalMergeReads) {
  ScratchDir dir;
  StoreOptions options = SmallStore(dir);
  options.threads = 1;
  absl::StatusOr<std::unique_ptr<TempStore>> store = TempStore::Create(options);
  ASSERT_TRUE(store.ok()) << store.status();
  // ~170 runs of 480 KiB: more than the final merge reads (two blocks per
  // run within the 16 MiB floor of its memory).
  std::vector<std::string> keys = Fill(**store, 450000, 500);
  ASSERT_TRUE((*store)->FinishLoading().ok());
  const StoreReport report = (*store)->report();
  EXPECT_GT(report.intermediate_merges, 0);
  EXPECT_LT(report.runs_merged(), report.runs_after_load_per_lane[0]);
  EXPECT_GT(report.write_amplification(), 1.0);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(ReadBack(**store), keys);
  // The merged runs' indexes too (the merges' inputs were forgotten).
  EXPECT_EQ((*store)->report().final_index_reads, 0);
}

// The final merge frees what it has read of each run as it goes: runs of
// ~14 MB (one lane, uncompressed) are partly released before the reader
// ends, and every record still comes back.
TEST(TempStoreTest, FinalMergeReleasesWhatItHasReadOfEachRun) {
  ScratchDir dir;
  StoreOptions options = SmallStore(dir);
  options.threads = 1;
  options.memory_budget = 32 << 20;
  options.run_compression = RunCompression::kNone;
  absl::StatusOr<std::unique_ptr<TempStore>> store = TempStore::Create(options);
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<std::string> keys = Fill(**store, 400000, 2000);
  ASSERT_TRUE((*store)->FinishLoading().ok());
  ASSERT_GE((*store)->report().runs_after_load_per_lane[0], 2);
  EXPECT_EQ((*store)->report().released_bytes, 0u);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(ReadBack(**store), keys);
  // Released in the background: wait for it (a loaded machine, sanitizers).
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while ((*store)->report().released_bytes <= (8u << 20) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GT((*store)->report().released_bytes, 8u << 20);
  EXPECT_TRUE((*store)->Destroy().ok());
  EXPECT_TRUE(dir.List().empty());
}

// Runs more than half of the page cache's room lose their cached pages
// before the final merge; runs that fit keep them. Every record comes back
// either way.
TEST(TempStoreTest, RunsBeyondTheCacheAreDroppedFromItBeforeTheFinalMerge) {
  for (const uint64_t room : {uint64_t{1} << 20, uint64_t{1} << 40}) {
    ScratchDir dir;
    StoreOptions options = SmallStore(dir);
    options.threads = 1;
    options.cache_room = [room] { return CacheRoom{room, "test"}; };
    absl::StatusOr<std::unique_ptr<TempStore>> store = TempStore::Create(options);
    ASSERT_TRUE(store.ok()) << store.status();
    std::vector<std::string> keys = Fill(**store, 100000, 200);
    ASSERT_TRUE((*store)->FinishLoading().ok());
    const int runs = (*store)->report().runs_merged();
    ASSERT_GE(runs, 2);
    std::sort(keys.begin(), keys.end());
    EXPECT_EQ(ReadBack(**store), keys);
    const StoreReport report = (*store)->report();
    EXPECT_EQ(report.cache_room_bytes, room);
    EXPECT_EQ(report.cache_room_source, "test");
    EXPECT_EQ(report.runs_dropped_from_cache, room == (uint64_t{1} << 20) ? runs : 0) << room;
    EXPECT_TRUE((*store)->Destroy().ok());
  }
}

// The loader waits for flushes silently: the write buffer manager stops it,
// not RocksDB's per-lane memtable count, whose stop logs a warning each time
// (hundreds of lines with -v when one lane takes every run).
TEST(TempStoreTest, WaitingForFlushesLogsNothing) {
  ScratchDir dir;
  StoreOptions options = SmallStore(dir);
  options.threads = 1;
  options.verbose = true;
  std::vector<std::string> lines;
  absl::Mutex mu;
  options.log = [&](const std::string& line) {
    absl::MutexLock lock(&mu);
    lines.push_back(line);
  };
  absl::StatusOr<std::unique_ptr<TempStore>> store = TempStore::Create(options);
  ASSERT_TRUE(store.ok()) << store.status();
  Fill(**store, 300000, 200);
  ASSERT_TRUE((*store)->FinishLoading().ok());
  absl::MutexLock lock(&mu);
  for (const std::string& line : lines) {
    EXPECT_FALSE(absl::StrContains(line, "Stopping writes")) << line;
  }
}

TEST(TempStoreTest, CancelledFlagStopsTheNextCommit) {
  ScratchDir dir;
  std::atomic<bool> cancelled{true};
  StoreOptions options = SmallStore(dir);
  options.cancelled = &cancelled;
  absl::StatusOr<std::unique_ptr<TempStore>> store = TempStore::Create(options);
  ASSERT_TRUE(store.ok()) << store.status();
  std::string storage;
  ASSERT_TRUE((*store)->Add("k", Payload("v", &storage)).ok());
  EXPECT_EQ((*store)->CommitBatch().code(), absl::StatusCode::kCancelled);
  store->reset();
  EXPECT_TRUE(dir.List().empty());
}

TEST(TempStoreTest, MissingParentDirectoryIsAnErrorNamingIt) {
  StoreOptions options;
  options.dir_prefix = "/nonexistent-dir-for-rocksort/x.";
  absl::StatusOr<std::unique_ptr<TempStore>> store = TempStore::Create(options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(store.status().message().find("/nonexistent-dir-for-rocksort/x."), std::string::npos);
}

}  // namespace
}  // namespace rocksort::store
