#include "store/background_merger_internal.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "rocksdb/convenience.h"
#include "rocksdb/db.h"
#include "rocksdb/listener.h"
#include "rocksdb/options.h"
#include "store/temp_db_internal.h"
#include "test_util.h"

namespace rocksort::store {
namespace {

using ::rocksort::test_util::ScratchDir;

constexpr int kKeysPerRun = 64;
constexpr int kValueBytes = 256;

// A DB like the sort's: runs are level-0 files, RocksDB never compacts.
std::unique_ptr<TempDb> OpenDb(const ScratchDir& dir, int lanes,
                               std::shared_ptr<rocksdb::EventListener> listener = nullptr) {
  rocksdb::Options options;
  if (listener != nullptr) options.listeners.push_back(std::move(listener));
  options.create_if_missing = true;
  options.error_if_exists = true;
  options.compaction_style = rocksdb::kCompactionStyleUniversal;
  options.num_levels = 1;
  options.disable_auto_compactions = true;
  options.level0_slowdown_writes_trigger = 1 << 30;
  options.level0_stop_writes_trigger = 1 << 30;
  absl::StatusOr<std::unique_ptr<TempDb>> db =
      TempDb::Create(dir.File("rocksort."), options, lanes, nullptr);
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? std::move(*db) : nullptr;
}

// Writes one run of kKeysPerRun keys (random values, so Snappy leaves them
// their size) into `lane` and flushes it; keys interleave across runs.
void FlushRun(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* lane, int run, std::mt19937* rng) {
  for (int k = 0; k < kKeysPerRun; ++k) {
    std::string value(kValueBytes, '\0');
    for (char& c : value) c = static_cast<char>((*rng)());
    const std::string key = absl::StrFormat("%08d-%04d", k, run);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), lane, key, value).ok());
  }
  rocksdb::FlushOptions flush;
  flush.wait = true;
  ASSERT_TRUE(db->Flush(flush, lane).ok());
}

int CountKeys(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* lane) {
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), lane));
  int keys = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++keys;
  EXPECT_TRUE(it->status().ok());
  return keys;
}

TEST(BackgroundMergerTest, MergesTheOldestFreshRunsAndLeavesNoneBehind) {
  ScratchDir dir;
  std::unique_ptr<TempDb> temp = OpenDb(dir, 2);
  ASSERT_NE(temp, nullptr);
  BackgroundMergeOptions options;
  options.min_width = 3;
  options.max_width = 5;
  options.max_runs_per_lane = 2;
  uint64_t merged_bytes = 0;
  int merges = 0;
  BackgroundMerger merger(temp->db(), temp->lanes(), options, [&](uint64_t bytes) {
    merged_bytes += bytes;  // One worker: no race.
    ++merges;
  });
  merger.Start();
  std::mt19937 rng(5);
  constexpr int kRuns = 23;
  for (int run = 0; run < kRuns; ++run) {
    for (rocksdb::ColumnFamilyHandle* lane : temp->lanes()) FlushRun(temp->db(), lane, run, &rng);
    merger.Notify();
    // The backlog never exceeds one merge.
    ASSERT_TRUE(merger.AwaitBacklog(options.max_width).ok());
  }
  // Until no lane has a merge's worth of fresh runs left.
  ASSERT_TRUE(merger.AwaitBacklog(options.min_width - 1).ok());
  ASSERT_TRUE(merger.Stop().ok());
  EXPECT_GT(merges, 0);
  EXPECT_GT(merged_bytes, 0u);

  const uint64_t fresh_bytes_max = kKeysPerRun * (kValueBytes + 64);
  for (rocksdb::ColumnFamilyHandle* lane : temp->lanes()) {
    SCOPED_TRACE(lane->GetName());
    // Oldest first: merged runs (3..5 fresh ones each), then fewer fresh
    // runs than a merge takes; never a fresh run between merged ones.
    const std::vector<rocksdb::SstFileMetaData> runs = SortedRuns(temp->db(), lane);
    size_t first_fresh = runs.size();
    for (size_t i = 0; i < runs.size(); ++i) {
      if (runs[i].size <= fresh_bytes_max) {
        first_fresh = std::min(first_fresh, i);
      } else {
        EXPECT_LT(i, first_fresh) << "a merged run after a fresh one";
        EXPECT_GE(runs[i].size, 3 * kKeysPerRun * kValueBytes);
      }
    }
    EXPECT_LT(runs.size() - first_fresh, static_cast<size_t>(options.min_width));
    EXPECT_LE(first_fresh,
              static_cast<size_t>((kRuns + options.min_width - 1) / options.min_width));
    // Nothing lost, nothing doubled.
    EXPECT_EQ(CountKeys(temp->db(), lane), kRuns * kKeysPerRun);
  }
}

TEST(BackgroundMergerTest, LeavesALaneTheFinalMergeCanRead) {
  ScratchDir dir;
  std::unique_ptr<TempDb> temp = OpenDb(dir, 1);
  ASSERT_NE(temp, nullptr);
  BackgroundMergeOptions options;
  options.min_width = 2;
  options.max_width = 4;
  options.max_runs_per_lane = 6;
  options.expected_runs_per_lane = 6;  // Exactly what the final merge reads.
  int merges = 0;
  BackgroundMerger merger(temp->db(), temp->lanes(), options, [&](uint64_t) { ++merges; });
  merger.Start();
  std::mt19937 rng(6);
  for (int run = 0; run < 6; ++run) {
    FlushRun(temp->db(), temp->lanes()[0], run, &rng);
    merger.Notify();
    ASSERT_TRUE(merger.AwaitBacklog(0).ok());  // Returns: no merge is due.
  }
  ASSERT_TRUE(merger.Stop().ok());
  EXPECT_EQ(merges, 0);
  EXPECT_EQ(SortedRuns(temp->db(), temp->lanes()[0]).size(), 6u);
}

TEST(BackgroundMergerTest, LearnsTheRunsToExpectFromTheFlushedRuns) {
  // The plan expected half the runs that come (a memtable holds less than
  // its size in records); the record bytes of the flushed runs tell the
  // real count, and the lane still ends within what the final merge reads.
  ScratchDir dir;
  std::unique_ptr<TempDb> temp = OpenDb(dir, 1);
  ASSERT_NE(temp, nullptr);
  constexpr int kRuns = 30;
  constexpr uint64_t kRunRecordBytes = kKeysPerRun * kValueBytes;
  BackgroundMergeOptions options;
  options.min_width = 2;
  options.max_width = 8;
  options.max_runs_per_lane = 6;
  options.expected_runs_per_lane = kRuns / 2;
  options.expected_bytes = kRuns * kRunRecordBytes;
  BackgroundMerger merger(temp->db(), temp->lanes(), options, [](uint64_t) {});
  merger.Start();
  std::mt19937 rng(8);
  for (int run = 0; run < kRuns; ++run) {
    FlushRun(temp->db(), temp->lanes()[0], run, &rng);
    merger.Notify(kRunRecordBytes);
    ASSERT_TRUE(merger.AwaitBacklog(0).ok());  // Until no merge is due.
  }
  ASSERT_TRUE(merger.Stop().ok());
  EXPECT_LE(SortedRuns(temp->db(), temp->lanes()[0]).size(), 6u);
  EXPECT_EQ(CountKeys(temp->db(), temp->lanes()[0]), kRuns * kKeysPerRun);
}

TEST(BackgroundMergerTest, NeverStartedOrStoppedItDoesNotBlock) {
  ScratchDir dir;
  std::unique_ptr<TempDb> temp = OpenDb(dir, 1);
  ASSERT_NE(temp, nullptr);
  BackgroundMergeOptions options;
  options.min_width = 2;
  options.max_width = 2;
  BackgroundMerger merger(temp->db(), temp->lanes(), options, [](uint64_t) {});
  std::mt19937 rng(7);
  for (int run = 0; run < 4; ++run) FlushRun(temp->db(), temp->lanes()[0], run, &rng);
  // Merges are due, but nothing runs them: the loader must not wait.
  EXPECT_TRUE(merger.AwaitBacklog(0).ok());
  EXPECT_TRUE(merger.Stop().ok());
  merger.Start();  // Not after Stop.
  EXPECT_FALSE(merger.started());
  EXPECT_TRUE(merger.AwaitBacklog(0).ok());
  EXPECT_EQ(SortedRuns(temp->db(), temp->lanes()[0]).size(), 4u);
}

// Cancels the DB's background work (what RunSort does on a signal) once a
// merge is under way: RocksDB calls OnSubcompactionBegin from the merging
// thread, before the first key.
class CancelOnMergeBegin : public rocksdb::EventListener {
 public:
  void OnSubcompactionBegin(const rocksdb::SubcompactionJobInfo&) override {
    if (rocksdb::DB* db = db_.load(); db != nullptr) rocksdb::CancelAllBackgroundWork(db, false);
    ++begun_;
  }
  void Arm(rocksdb::DB* db) { db_ = db; }
  int begun() const { return begun_.load(); }

 private:
  std::atomic<rocksdb::DB*> db_{nullptr};
  std::atomic<int> begun_{0};
};

// A running merge stops, as Cancelled, and leaves the runs as they were: no
// half-merged run, nothing lost.
TEST(MergeRunsTest, ARunningMergeStopsWhenBackgroundWorkIsCancelled) {
  ScratchDir dir;
  auto listener = std::make_shared<CancelOnMergeBegin>();
  std::unique_ptr<TempDb> temp = OpenDb(dir, 1, listener);
  ASSERT_NE(temp, nullptr);
  rocksdb::ColumnFamilyHandle* lane = temp->lanes()[0];
  std::mt19937 rng(9);
  for (int run = 0; run < 4; ++run) FlushRun(temp->db(), lane, run, &rng);

  listener->Arm(temp->db());
  const absl::StatusOr<rocksdb::CompactionJobInfo> stopped = MergeRuns(
      temp->db(), lane, SortedRuns(temp->db(), lane), {0, 4}, rocksdb::kLZ4Compression, "merging");
  EXPECT_EQ(listener->begun(), 1);
  EXPECT_TRUE(absl::IsCancelled(stopped.status())) << stopped.status();
  EXPECT_EQ(SortedRuns(temp->db(), lane).size(), 4u);
  EXPECT_EQ(CountKeys(temp->db(), lane), 4 * kKeysPerRun);
  // And no merge starts after it.
  const absl::StatusOr<rocksdb::CompactionJobInfo> refused = MergeRuns(
      temp->db(), lane, SortedRuns(temp->db(), lane), {0, 2}, rocksdb::kLZ4Compression, "merging");
  EXPECT_TRUE(absl::IsCancelled(refused.status())) << refused.status();
  EXPECT_EQ(listener->begun(), 1);
}

}  // namespace
}  // namespace rocksort::store
