// File: store/options_plan_internal.h  (internal to store/ and its tests)
// -----------------------------------------------------------------------------
// Turns the resources a sort may use (memory budget, threads, the estimated
// data size from -s, the kind of disk) into RocksDB options and merge limits.
// Pure functions of their inputs: no I/O, no global state, thread-safe.
// Knows nothing about BAM; it sees keys and values as bytes.
//
// Memory model (B = memory budget = threads x -m):
//   load:  memtables       3 x write_buffer_size = 3/4 B over all lanes
//                          (vector memtables; a WriteBufferManager caps
//                          their sum)
//          loader batch    min(4 MiB, B/16)
//   after loading, P = 3/4 B + max(B/4, 16 MiB) (what loading used) is
//   shared by the merges that run at once (one per lane); the final merge
//   then uses max(3/4 B, 16 MiB, 8 runs per lane at the seek floor). Per
//   sorted run a merge holds
//   its readahead + 2 x block_size (compressed readahead buffer plus the
//   decoded block the iterator holds).
// The fixed overhead outside B (htslib decode queues, BGZF blocks in flight,
// RocksDB's own tables) is measured and stated in docs/design.md.
#ifndef ROCKSORT_STORE_OPTIONS_PLAN_INTERNAL_H_
#define ROCKSORT_STORE_OPTIONS_PLAN_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/disk_info.h"
#include "store/store.h"
#include "rocksdb/options.h"

namespace rocksort::store {

struct PolicyInput {
  // Total memory the sort may use, bytes (threads x -m). Must be >= 1 MiB.
  uint64_t memory_budget = uint64_t{768} << 20;
  // Threads the user granted (-@, at least 1).
  int threads = 1;
  // Estimated uncompressed size of the data (-s or estimated from the input
  // file). 0 = unknown (a pipe): compaction starts adaptively once more runs
  // were flushed than the final merge reads efficiently.
  uint64_t size_hint = 0;
  // False for --no-compaction / -s 0: no merges while loading, and the
  // final merge reads the flushed runs directly (min_readahead one block),
  // after merging only what its memory or the open-file limit cannot hold.
  bool allow_compaction = true;
  DiskKind disk = DiskKind::kSsd;
  RunCompression run_compression = RunCompression::kLz4;
  // Largest read the temp directory's device serves as one request
  // (DiskDetection::request_bytes), 0 if unknown. Readahead sizes above it
  // are fitted to whole requests.
  uint64_t request_bytes = 0;
  // The process's open-file limit (RLIMIT_NOFILE), 0 if unlimited or
  // unknown. Runs may outnumber it (many runs while loading without
  // compaction); merges must not read more runs at once than it allows.
  uint64_t open_files = 0;
};

enum class CompactionMode {
  kOff,       // Never merge in the background.
  kPlanned,   // Size known and runs > max_final_runs: merge from the start.
  kAdaptive,  // Size unknown: start merging when runs exceed adaptive_trigger_runs.
};

struct SortPlan {
  // Complete options for the temporary DB (create_if_missing, error_if_exists,
  // vector memtable, LZ4 or Snappy runs, no WAL-related sync, never stalling
  // writes). Every merge writes options.compression too.
  rocksdb::Options options;
  // Bytes per loader WriteBatch.
  size_t batch_bytes = 0;
  // Column families ("lanes") the sorted runs are spread over: the loader
  // moves to the next lane each time RocksDB seals a memtable, so the lanes
  // get the runs in turn. Each lane is its own level-0 LSM, so
  // after loading one merge per lane can run at once (RocksDB refuses two
  // merges into the same level over overlapping keys within one family).
  // The emit phase merges the lanes' iterators. 1 = the default family only.
  int lanes = 1;
  // Whether runs are merged while loading (pipeline::BackgroundMerger;
  // RocksDB's own compaction is always off: disable_auto_compactions).
  CompactionMode compaction = CompactionMode::kOff;
  // kAdaptive: the pipeline starts merging once this many runs exist.
  int adaptive_trigger_runs = 0;
  // Runs the size hint predicts (size_hint / write_buffer_size), 0 if unknown.
  uint64_t expected_runs = 0;
  // Runs one merge while loading takes: at least merge_fan_in, at most
  // merge_max_fan_in (what the memory of one merge holds at
  // min_background_readahead per input). At most background_merges run at
  // once.
  int merge_fan_in = 0;
  int merge_max_fan_in = 0;
  int background_merges = 1;
  // After loading, the memtables' and compactions' memory (post_load_memory)
  // is free for the merges down to K runs, one merge per lane at a time:
  // each merges up to merge_down_fan_in runs read with merge_down_readahead
  // per input (compaction_readahead_size is set to it once loading is done),
  // so the lanes' merges together stay within post_load_memory.
  uint64_t post_load_memory = 0;
  int merge_down_fan_in = 0;
  size_t merge_down_readahead = 0;
  // Memory the final merge may spend on readahead and blocks, bytes.
  uint64_t merge_budget = 0;
  // Smallest readahead per run of the final merge: the disk's seek floor
  // (2 MiB on hdd, 256 KiB on ssd), or less when smaller reads still
  // deliver what the emit phase consumes (1 MiB on hdd at -@ 1-2); one block
  // when compaction is off, so that it reads as many runs as memory holds.
  size_t min_readahead = 0;
  // Smallest readahead per input of a merge after loading, which reads runs
  // back from the disk; merge_down_readahead is at least this.
  size_t min_merge_readahead = 0;
  // Smallest readahead per input of a background merge (while loading):
  // min_merge_readahead, or 128 KiB (fresh runs are read from the page
  // cache) when the size is known and one merge at min_merge_readahead
  // cannot take T / K runs.
  // The options' compaction_readahead_size is at least this while loading.
  size_t min_background_readahead = 0;
  // Readahead per run beyond which more memory buys nothing.
  size_t max_readahead = 0;
  // PolicyInput::request_bytes. When it is larger than read_slack, every
  // readahead of the plan larger than one request is a whole number of
  // requests minus read_slack: RocksDB reads the block it needs plus the
  // readahead (up to read_slack more), so a readahead of exactly 2 MiB became
  // reads of 2 MiB + a few KiB, which a device taking 1016 KiB per request
  // serves in three requests, the third for the few KiB. Each request of a
  // rotating disk may cost a seek. (Two limits: the kernel cuts a read into
  // 2 MiB pieces, so reads above 2 MiB may still end each piece in a small
  // request; and a block holding a record longer than block_size exceeds
  // the slack.)
  uint64_t request_bytes = 0;
  size_t read_slack = 0;
  // The most sorted runs the final merge may read at once (>= 8 per lane):
  // more runs than this are first merged down with intermediate merges.
  int max_final_runs = 0;
  // max_final_runs / lanes: what each lane is merged down to.
  int max_final_runs_per_lane = 0;
};

// Derives every option from `input`. memory_budget below 1 MiB counts as 1 MiB.
//
// The model (docs/design.md derives it):
//   * A disk needs reads of a seek floor per request to keep seeks a small
//     fraction of transfer time: seek x bandwidth is ~1.4 MiB on a disk (8 ms
//     at 180 MB/s), ~0.1 MiB on an SSD; the floor is ~1.5x that (2 MiB, 256
//     KiB). The final merge only has to keep up with the emit phase (BGZF-bound,
//     ~26 MB/s of runs per thread), so min_readahead is the smallest read
//     that delivers 1.5x that, between 1 MiB and the floor on a disk.
//   * The final merge may use merge_budget = max(3/4 B, 16 MiB, enough for 8
//     runs per lane at the floor), so it reads at most
//     K = max_final_runs = merge_budget / (min_readahead + 2 x block) runs.
//     With compaction off min_readahead is one block: K is what memory can
//     hold at all, not what the disk reads efficiently.
//   * Expected runs T = size / write_buffer_size. If T <= K nothing is merged
//     before the end (compaction would be pure write amplification). Otherwise
//     while loading, each lane's oldest f to F fresh runs are merged into one
//     (pipeline::BackgroundMerger), with f the larger of T / K (one round
//     reaches K runs) and 2, and F what fits in the memory of one merge,
//     max(B/4, 16 MiB) / background_merges, at min_background_readahead + 2 x
//     block per input (f <= F); the inputs share that memory as readahead
//     (compaction_readahead_size). When memory caps f, the merges after
//     loading take the ~T / f merged runs to K.
//   * lanes = min(threads, 4): the runs are split over that many column
//     families so that the merges after loading use that many cores.
SortPlan MakePlan(const PolicyInput& input);

// Readahead per run for a final merge over `runs` sorted runs:
// merge_budget / runs minus the block buffers, clamped to
// [min_readahead, max_readahead] and fitted to whole requests.
size_t FinalReadahead(const SortPlan& plan, int runs);

// `bytes` as a whole number (at least one) of device requests of
// `request_bytes`, the nearest (`nearest`) or the next lower; unchanged when
// it fits in one request or the request size is unknown (0).
uint64_t WholeRequests(uint64_t bytes, uint64_t request_bytes, bool nearest);

// Human-readable summary of the plan's main numbers, for -v.
std::string DescribePlan(const SortPlan& plan);

}  // namespace rocksort::store

#endif  // ROCKSORT_STORE_OPTIONS_PLAN_INTERNAL_H_
