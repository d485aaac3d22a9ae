// File: store/store.h
// -----------------------------------------------------------------------------
// The temporary store: everything rocksort does with RocksDB, behind one
// small interface. Nothing outside src/store/ includes a RocksDB header.
//
// A TempStore is one sort's scratch database, used in three steps:
//   1. load:   Add() keyed records (it is a record::KeyedRecordSink), then
//              CommitBatch() after each batch of about batch_bytes(). RocksDB
//              sorts full memtables into runs in background threads; when
//              the data is many times larger than memory, runs are merged
//              in the background while loading continues (the merges are
//              planned from the size hint, or started adaptively).
//   2. settle: FinishLoading() stops the background merges, flushes the last
//              memtables and merges down to the runs one final merge reads
//              efficiently within the memory budget.
//   3. read:   NewReader() streams every record in key order (the final
//              merge), with the readahead the plan gives each run.
// Destroy() (or the destructor, on any error path) closes and deletes the
// database and its directory; a registry learns the directory so that a
// signal removes it too.
//
// docs/design.md explains the memory model and every RocksDB option.
//
// Thread-safety: a TempStore is driven by one thread; it runs its own
// background threads (RocksDB's flushes, the merges).
#ifndef ROCKSORT_STORE_STORE_H_
#define ROCKSORT_STORE_STORE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/disk_info.h"
#include "common/interrupt.h"
#include "common/memory_info.h"
#include "record/record.h"

namespace rocksort::store {

// How sorted runs are compressed on disk (--run-compression).
enum class RunCompression {
  kAuto,    // Default: LZ4, except that the few large runs only the final
            // merge reads (written direct) are written uncompressed once
            // the disk is seen writing them well ahead of the load
            // (docs/design.md, "Run compression").
  kLz4,     // The least CPU per byte of the compressions (docs/design.md).
  kSnappy,  // The original rocksort's choice.
  kZstd,    // zstd level 1: about a third fewer temporary bytes than LZ4, for
            // more CPU; for scratch space or disk bandwidth that is short.
  kNone,    // Uncompressed: the least CPU, the most bytes; for fast disks.
};

struct StoreOptions {
  // Total memory the sort may use, bytes (threads x -m). At least 1 MiB.
  uint64_t memory_budget = uint64_t{768} << 20;
  // Threads the user granted (-@, at least 1).
  int threads = 1;
  // Estimated uncompressed size of the data, bytes; 0 = unknown (a pipe):
  // merging starts adaptively once more runs exist than the final merge
  // reads efficiently.
  uint64_t size_hint = 0;
  // False for --no-compaction / -s 0: no merges while loading, and the
  // final merge reads the flushed runs directly, merging first only what
  // its memory or the open-file limit cannot hold.
  bool allow_compaction = true;
  // The disk under `dir_prefix`, and the largest read it serves as one
  // request (DiskDetection::request_bytes; 0 = unknown).
  DiskKind disk = DiskKind::kSsd;
  uint64_t request_bytes = 0;
  // How many files the store may open: the open-file limit less the
  // descriptors open before it (the inputs', the output's); 0 if unlimited
  // or unknown.
  uint64_t open_files = 0;
  RunCompression run_compression = RunCompression::kAuto;
  // The database goes into the fresh directory `<dir_prefix>XXXXXX`.
  std::string dir_prefix;
  // Learns the directory for forced cleanup on signals. May be null; not
  // owned; must outlive the store.
  CleanupRegistry* registry = nullptr;
  // Polled between batches and merges; once true, work stops with
  // Cancelled and running merges are aborted. May be null.
  const std::atomic<bool>* cancelled = nullptr;
  // Receives one line per notice: RocksDB's warnings and errors (only with
  // `verbose`), the start of adaptive merging, a scratch-space warning.
  // Called from any thread. May be empty.
  std::function<void(const std::string&)> log;
  bool verbose = false;
  // What the page cache can hold for this process when the final merge
  // begins (the runs' cached pages are dropped when the runs are more than
  // half of it). Tests give their own.
  std::function<CacheRoom()> cache_room = [] { return PageCacheRoom(); };
};

// What the store did, for -v and --stats-json.
struct StoreReport {
  std::string plan;             // The options plan in one line.
  std::string compaction_mode;  // "off", "planned" or "adaptive".
  int lanes = 1;                // Column families the runs were spread over.
  bool adaptive_compaction_started = false;
  int runs_flushed = 0;                   // Memtable flushes, i.e. sorted runs created.
  uint64_t flush_bytes = 0;               // Bytes those flushes wrote.
  int compactions = 0;                    // Merges while loading plus after loading.
  uint64_t compaction_bytes = 0;          // Bytes they wrote (both kinds).
  int intermediate_merges = 0;            // Merges after loading.
  uint64_t intermediate_merge_bytes = 0;  // Bytes they wrote (part of compaction_bytes).
  std::vector<int> runs_after_load_per_lane;
  std::vector<int> runs_merged_per_lane;  // Runs read by the final merge, per lane.
  // Memtables the final merge read from memory instead of having them
  // flushed (SortPlan::final_merge_reads_memtables).
  int memtables_at_final_merge = 0;
  size_t final_readahead = 0;             // Per run, bytes.
  // Runs whose index the final merge read when it began (the others' were
  // read as they were written).
  int final_index_reads = 0;
  uint64_t peak_temp_bytes = 0;           // Largest total size of the runs seen.
  uint64_t released_bytes = 0;            // Of the runs, freed behind the final merge.
  // The final merge's block reads that waited for the disk (the prefetch had
  // not brought their pages in), and the wall time they took.
  uint64_t final_stalled_reads = 0;
  double final_stalled_seconds = 0;
  // What the page cache can hold for this process as the final merge
  // begins (common/memory_info.h), and where that figure comes from.
  uint64_t cache_room_bytes = 0;
  std::string cache_room_source;
  // Runs whose cached pages were dropped then (all or none: see store.cc).
  int runs_dropped_from_cache = 0;
  // --run-compression auto where the plan leaves it to the disk
  // (SortPlan::raw_runs_if_disk_keeps_up): what was chosen and why, e.g.
  // "uncompressed after 1 run: the disk wrote 612 MB/s, the load made 180
  // MB/s". Empty where there was no such choice.
  std::string run_compression_choice;
  // The loader's wall time in CommitBatch: writing batches (DB::Write,
  // stalls for memtable memory included) and waiting for the background
  // merges' backlog.
  double write_seconds = 0;
  double merge_wait_seconds = 0;

  int runs_merged() const {
    return std::accumulate(runs_merged_per_lane.begin(), runs_merged_per_lane.end(), 0);
  }
  // Bytes written to the store per byte flushed (1.0 = no merging).
  double write_amplification() const {
    return flush_bytes == 0 ? 0.0
                            : static_cast<double>(flush_bytes + compaction_bytes) / flush_bytes;
  }
};

// The records of a settled store in key order. Owned by the caller; must be
// destroyed before its store.
class SortedReader {
 public:
  virtual ~SortedReader() = default;
  // Points *value at the next record and returns true, or returns false at
  // the end or on an error (then status() says which). The bytes stay valid
  // until the next call.
  virtual bool Next(absl::string_view* value) = 0;
  virtual absl::Status status() const = 0;
  // Bytes each run is read ahead with (the sink sizes its queue to hide a
  // read that long).
  virtual size_t readahead() const = 0;
};

class TempStore : public record::KeyedRecordSink {
 public:
  // Plans the options from `options`, creates the directory and opens the
  // database. Errors name the directory.
  static absl::StatusOr<std::unique_ptr<TempStore>> Create(const StoreOptions& options);
  ~TempStore() override;

  TempStore(const TempStore&) = delete;
  TempStore& operator=(const TempStore&) = delete;

  // The directory holding the database.
  const std::string& dir() const;
  // Bytes of records a batch should hold before CommitBatch: large enough
  // that RocksDB's per-write cost vanishes, small enough for the budget.
  size_t batch_bytes() const;

  // Adds a record to the current batch. REQUIRES: keys are unique.
  absl::Status Add(absl::string_view key, const record::EncodedRecord& record) override;
  // Writes the current batch, then waits while the background merges lag
  // behind the flushes (so that they read runs still in the page cache).
  // Cancelled once options.cancelled is set.
  absl::Status CommitBatch();
  // After the last batch: stops the merges while loading, flushes and
  // merges down to what the final merge reads.
  absl::Status FinishLoading();
  // Every record in key order. REQUIRES: FinishLoading() succeeded.
  absl::StatusOr<std::unique_ptr<SortedReader>> NewReader();
  // Closes and deletes the database and its directory. Idempotent.
  absl::Status Destroy();

  StoreReport report() const;

 private:
  class Impl;
  explicit TempStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Scratch space a sort of `size_hint` uncompressed bytes may need at its
// peak, measured (docs/tuning.md): the runs hold about half the size (LZ4 or
// Snappy), a third (zstd) or all of it (uncompressed), and a merge briefly
// holds its inputs and its output, so with merging the peak is up to ~1.5x
// the runs.
uint64_t ExpectedScratchPeak(uint64_t size_hint, RunCompression compression);

}  // namespace rocksort::store

#endif  // ROCKSORT_STORE_STORE_H_
