// File: store/background_merger_internal.h  (internal to store/ and its tests)
// -----------------------------------------------------------------------------
// Merges sorted runs while loading continues. RocksDB's automatic
// compaction stays off: its universal picker starts from the newest runs,
// and when the compaction thread lagged behind the flushes it left the
// older fresh runs behind between merged runs, where only the merges after
// loading (reading them back from disk) could reach them. The merger picks
// instead (store::PickBackgroundMerge): in each lane the oldest
// fresh runs first, f to F of them, with DB::CompactFiles, so a lane stays
// its merged runs followed by the runs flushed since. AwaitBacklog lets the
// loader wait while a lane holds more fresh runs than one merge takes, so
// the merges read runs that were flushed moments ago (from the page cache)
// and little is left to merge after loading.
//
// Workers own disjoint sets of lanes (lane i belongs to worker i % workers),
// so the merges that run at once are at most `workers`, and never two in one
// lane (RocksDB refuses two merges into level 0 over overlapping keys).
// Each merge reads its inputs with the DB's compaction_readahead_size.
#ifndef ROCKSORT_STORE_BACKGROUND_MERGER_INTERNAL_H_
#define ROCKSORT_STORE_BACKGROUND_MERGER_INTERNAL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "rocksdb/db.h"
#include "rocksdb/listener.h"
#include "rocksdb/metadata.h"
#include "store/merge_plan_internal.h"

namespace rocksort::store {

// An error from RocksDB as a Status: "what: RocksDB's message".
absl::Status FromRocks(const std::string& what, const rocksdb::Status& s);

// A lane's runs (its level-0 files), oldest first.
std::vector<rocksdb::SstFileMetaData> SortedRuns(rocksdb::DB* db,
                                                 rocksdb::ColumnFamilyHandle* lane);

// Merges runs[window] of `lane` (as SortedRuns lists them) into one level-0
// run written with `compression` (DB::CompactFiles) and returns what the
// merge did. A failure reads "`what`: RocksDB's message"; Cancelled when
// the DB's background work was cancelled (rocksdb::CancelAllBackgroundWork)
// before or during the merge.
absl::StatusOr<rocksdb::CompactionJobInfo> MergeRuns(
    rocksdb::DB* db, rocksdb::ColumnFamilyHandle* lane,
    const std::vector<rocksdb::SstFileMetaData>& runs, store::MergeWindow window,
    rocksdb::CompressionType compression, const std::string& what);

struct BackgroundMergeOptions {
  int min_width = 2;  // f: runs a merge takes at least.
  int max_width = 2;  // F: runs a merge takes at most (what its memory holds).
  // What the final merge reads from each lane: a lane is merged only while
  // its runs, with the ones still expected, exceed this.
  int max_runs_per_lane = 1;
  // Runs the size estimate predicts per lane; 0 = unknown (merge as long as
  // runs arrive).
  uint64_t expected_runs_per_lane = 0;
  // The record bytes the size estimate predicts (0 = unknown). Once runs
  // have been flushed, the runs expected per lane are these bytes over the
  // record bytes a flushed run holds on average (Notify): a memtable holds
  // less than write_buffer_size of records (its index, keys, slack), and by
  // how much depends on the record size.
  uint64_t expected_bytes = 0;
  int workers = 1;  // Merges at a time.
  // Of the merged runs (the flushes' compression, from the DB's options).
  rocksdb::CompressionType compression = rocksdb::kLZ4Compression;
  // Checked before each merge; once set, the workers stop.
  const std::atomic<bool>* cancelled = nullptr;
};

class BackgroundMerger {
 public:
  // `after_merge` is called (from a worker) with the bytes each merge wrote.
  BackgroundMerger(rocksdb::DB* db, std::vector<rocksdb::ColumnFamilyHandle*> lanes,
                   const BackgroundMergeOptions& options,
                   std::function<void(uint64_t)> after_merge);
  // Stops the workers (see Stop).
  ~BackgroundMerger();

  BackgroundMerger(const BackgroundMerger&) = delete;
  BackgroundMerger& operator=(const BackgroundMerger&) = delete;

  // Starts the workers; once only, and not after Stop.
  void Start();
  bool started() const { return !workers_.empty(); }

  // A flush completed, of a run holding `record_bytes` of records (0: not
  // known): new runs may make a merge due. Safe to call from RocksDB's
  // listener callbacks, at any time.
  void Notify(uint64_t record_bytes = 0);

  // Blocks the caller (the loader) while a lane that needs merging holds
  // more than `max_fresh_runs` fresh runs, i.e. while the merges lag behind
  // the flushes, and returns the first merge failure (OK also when stopped,
  // cancelled or never started). Runs merged soon after their flush are
  // still in the page cache; a backlog that grows while loading is read back
  // from disk, after loading, by the merges the final merge waits for.
  // Cheap when nothing changed: it looks at the lanes again only after a
  // Notify (a flush) or a merge.
  absl::Status AwaitBacklog(uint64_t max_fresh_runs);

  // Lets the running merges finish, stops the workers and returns the first
  // failure. The runs are stable afterwards. Idempotent.
  absl::Status Stop();

 private:
  // A worker: whenever a flush completed, runs the merges due in `lanes`
  // (indexes into lanes_, owned by this worker).
  void Work(std::vector<int> lanes);
  // A lane's runs (oldest first), how many are fresh, and the merge due in
  // it, if any.
  struct LaneScan {
    std::vector<rocksdb::SstFileMetaData> runs;
    uint64_t fresh_runs = 0;
    std::optional<store::MergeWindow> window;
  };
  LaneScan Scan(int lane);
  // The runs a lane is expected to receive in all (0 = unknown).
  uint64_t ExpectedRunsPerLane() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Runs the merges due in `lanes` until none is; `next` is the position in
  // `lanes` after the lane merged last. `last_outputs` holds the worker's
  // previous merge's runs, dropped from the page cache once more after the
  // next merge (what was still being written back the first time).
  absl::Status MergeDue(const std::vector<int>& lanes, size_t* next,
                        std::vector<std::string>* last_outputs);

  rocksdb::DB* const db_;
  const std::vector<rocksdb::ColumnFamilyHandle*> lanes_;
  const BackgroundMergeOptions options_;
  const std::function<void(uint64_t)> after_merge_;
  mutable absl::Mutex mu_;
  // Per lane: the file numbers of the runs its merges wrote, and how many
  // runs its merges consumed.
  std::vector<std::set<uint64_t>> merged_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> consumed_ ABSL_GUARDED_BY(mu_);
  uint64_t merges_ ABSL_GUARDED_BY(mu_) = 0;
  // AwaitBacklog found no lane behind (with at most clear_max_fresh_runs_
  // fresh runs) when flushes_ + merges_ was clear_at_changes_.
  uint64_t clear_at_changes_ ABSL_GUARDED_BY(mu_) = ~uint64_t{0};
  uint64_t clear_max_fresh_runs_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t flushes_ ABSL_GUARDED_BY(mu_) = 0;
  // The flushes Notify was told the record bytes of, and their sum.
  uint64_t measured_runs_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t measured_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
};

}  // namespace rocksort::store

#endif  // ROCKSORT_STORE_BACKGROUND_MERGER_INTERNAL_H_
