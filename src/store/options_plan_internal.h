// File: store/options_plan_internal.h  (internal to store/ and its tests)
// -----------------------------------------------------------------------------
// Turns the resources a sort may use (memory budget, threads, the estimated
// data size from -s, the kind of disk) into RocksDB options and merge limits.
// Pure functions of their inputs: no I/O, no global state, thread-safe.
// Knows nothing about BAM; it sees keys and values as bytes.
//
// Memory model (B = memory budget = threads x -m):
//   load:   memtables       memtables x write_buffer_size = B over all
//                           lanes (2: one filling, one being sorted and
//                           written; 3 where each is 256 MiB or more: two
//                           written at once; a WriteBufferManager caps
//                           their sum)
//           loader batch    min(4 MiB, B/16)
//   merges: per run read    2 x block_size resident (the block read and the
//                           block decoded; no readahead buffer: runs are
//                           read ahead in the page cache, below)
//           final merge     up to max(3/4 B, 4 MiB) of runs being read;
//                           with memtables of kMinDirectWriteBuffer or
//                           more, the memtables loading left (<= B) and
//                           two blocks per run, a few runs;
//           merges while or after loading share max(B/4, 4 MiB), or
//                           after loading B + that.
//   page cache: a merge's runs are read ahead (prefetch_fs_internal.h), up
//           to page_cache_budget = min(256 MiB, 128 MiB + 2 B) in all: it is
//           reclaimable page cache, not resident memory, but a machine
//           short of memory evicts it before it is read, so it is bounded.
// The fixed overhead outside B (htslib decode queues, BGZF blocks in flight,
// RocksDB's tables and indexes, the prefetch threads' buffers) is measured
// and stated in docs/design.md.
#ifndef ROCKSORT_STORE_OPTIONS_PLAN_INTERNAL_H_
#define ROCKSORT_STORE_OPTIONS_PLAN_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/disk_info.h"
#include "rocksdb/options.h"
#include "store/huge_chunks_internal.h"
#include "store/run_memtable_internal.h"
#include "store/store.h"

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
  // final merge reads the flushed runs directly (in chunks down to one
  // block), after merging only what its memory or the open-file limit
  // cannot hold.
  bool allow_compaction = true;
  DiskKind disk = DiskKind::kSsd;
  RunCompression run_compression = RunCompression::kAuto;
  // Largest read the temp directory's device serves as one request
  // (DiskDetection::request_bytes), 0 if unknown. Chunks read ahead are
  // fitted to whole requests.
  uint64_t request_bytes = 0;
  // How many files the store may open (StoreOptions::open_files), 0 if
  // unlimited or unknown. Runs may outnumber it (many runs while loading without
  // compaction); merges must not read more runs at once than it allows.
  uint64_t open_files = 0;
};

enum class CompactionMode {
  kOff,       // Never merge in the background.
  kPlanned,   // Size known and runs > max_final_runs: merge from the start.
  kAdaptive,  // Size unknown: start merging when runs exceed adaptive_trigger_runs.
};

// How the runs of a merge are read ahead (prefetch_fs_internal.h): `chunk`
// bytes at a time, the next chunk requested once the reader is within
// `lead` bytes of the last.
struct Readahead {
  uint64_t chunk = 0;
  uint64_t lead = 0;
};

struct SortPlan {
  // Complete options for the temporary DB (create_if_missing, error_if_exists,
  // run memtables, no readahead of RocksDB's own, never stalling writes).
  // options.compression is that of the flushed runs: uncompressed where
  // every one is merged while loading, else the run compression asked for.
  rocksdb::Options options;
  // Where the memtables keep their entries when not in RocksDB's arena
  // (write_buffer_size of 8 huge pages or more); the store trims it once
  // loading is over. Null otherwise.
  std::shared_ptr<HugeChunkPool> memtable_chunks;
  // options.memtable_factory, which the store tells when loading is over.
  std::shared_ptr<RunMemTableFactory> memtable_factory;
  // The final merge reads the memtables loading leaves from memory instead
  // of having them flushed, where the budget is cut into memtables of
  // kMinDirectWriteBuffer or more and no merge is planned: a few runs, each
  // read once, by the final merge (store.cc, FinishLoading).
  bool final_merge_reads_memtables = false;
  // The same runs (and --run-compression auto): options.compression is
  // none, and the store keeps it so while the first run shows the disk
  // writing runs well ahead of the load, with room for them (RawRunsPay);
  // otherwise the runs flushed from then on (or, where the filesystem
  // lacks the room from the start, every run) have merged_compression.
  bool raw_runs_if_disk_keeps_up = false;
  // The compression of the runs every merge writes (--run-compression).
  rocksdb::CompressionType merged_compression = rocksdb::kLZ4Compression;
  // Every fresh run is merged while loading (the size is known and makes
  // more runs than the final merge reads): fresh runs are written
  // uncompressed and their writeback is deferred (ScratchFileSystem).
  bool fresh_runs_merged = false;
  // Bytes per loader WriteBatch.
  size_t batch_bytes = 0;
  // Memtables the budget less a batch is cut into (write_buffer_size each).
  uint64_t memtables = 2;
  // Column families ("lanes") the sorted runs are spread over: the loader
  // moves to the next lane each time RocksDB seals a memtable, so the lanes
  // get the runs in turn, and their flushes run side by side. Each lane is
  // its own level-0 LSM, so after loading one merge per lane can run at
  // once (RocksDB refuses two merges into the same level over overlapping
  // keys within one family). The final merge reads every lane's runs.
  int lanes = 1;
  // Whether runs are merged while loading (BackgroundMerger; RocksDB's own
  // compaction is always off: disable_auto_compactions).
  CompactionMode compaction = CompactionMode::kOff;
  // kAdaptive: merging starts once this many runs exist.
  int adaptive_trigger_runs = 0;
  // Runs the size hint predicts (size_hint / write_buffer_size), 0 if unknown.
  // A memtable holds less than that in records; the merger corrects the
  // count from the runs flushed (BackgroundMergeOptions::expected_bytes).
  uint64_t expected_runs = 0;
  // Resident memory per run a merge reads: two blocks.
  uint64_t run_resident_bytes = 0;
  // Page cache all the runs read ahead at one time may hold.
  uint64_t page_cache_budget = 0;
  // Chunks between these bounds (fitted to whole device requests): below
  // min_chunk a rotating disk spends its time seeking, above max_chunk more
  // page cache buys nothing. min_chunk is one block with compaction off.
  uint64_t min_chunk = 0;
  uint64_t max_chunk = 0;
  // The lead of every merge's readahead.
  uint64_t lead = 0;
  // PolicyInput::request_bytes.
  uint64_t request_bytes = 0;
  // Runs one merge while loading takes: at least merge_fan_in (what one
  // round needs to reach max_final_runs; with the size known, the merger
  // recomputes it from the runs still expected, PickBackgroundMerge), at
  // most merge_max_fan_in (what its memory holds). At most
  // background_merges run at once, reading their inputs, fresh runs mostly
  // still in the page cache, with background_readahead.
  int merge_fan_in = 0;
  int merge_max_fan_in = 0;
  int background_merges = 1;
  Readahead background_readahead;
  // After loading, the memtables' and the merges' memory (post_load_memory)
  // is free for the merges down to max_final_runs, one per lane at a time:
  // each merges up to merge_down_fan_in runs with merge_down_readahead.
  uint64_t post_load_memory = 0;
  int merge_down_fan_in = 0;
  Readahead merge_down_readahead;
  // Resident memory of the runs the final merge reads.
  uint64_t merge_budget = 0;
  // The most sorted runs the final merge may read at once: what its memory
  // holds, what the page cache holds at min_chunk + lead each, and what the
  // open-file limit allows. More runs are first merged down.
  int max_final_runs = 0;
  // max_final_runs / lanes: what each lane is merged down to.
  int max_final_runs_per_lane = 0;
};

// Derives every option from `input`. memory_budget below 1 MiB counts as 1 MiB.
//
// The model (docs/design.md derives it):
//   * Runs are as large as memory allows: write_buffer_size = B / 2.
//     Expected runs T = size / write_buffer_size.
//   * A merge reads each run a chunk at a time in the page cache, ahead of
//     its reader, and holds two blocks of each resident. A rotating disk
//     needs chunks of min_chunk (512 KiB) or more, or seeks dominate.
//   * The final merge reads at most K = max_final_runs runs: its memory
//     (max(3/4 B, 4 MiB)) / 2 blocks, page_cache_budget / (min_chunk +
//     lead), and half the open files. If T <= K nothing is merged before the
//     end: every record is written once.
//   * Otherwise while loading, each lane's oldest f to F fresh runs are
//     merged into one (BackgroundMerger), f = max(ceil(T / K), 2) so that
//     one round reaches K, F what the merges' memory holds. When memory caps
//     f, the merges after loading take the ~T / f merged runs to K.
//   * lanes = min(threads, 4).
SortPlan MakePlan(const PolicyInput& input);

// The readahead of a final merge over `runs` runs: the page cache budget
// shared by the runs, less the lead, between min_chunk and max_chunk, in
// whole device requests; what the share holds beyond the chunk is the lead,
// from the plan's lead up to 8 chunks.
Readahead FinalReadahead(const SortPlan& plan, int runs);

// `bytes` as a whole number (at least one) of device requests of
// `request_bytes`, the nearest (`nearest`) or the next lower; unchanged when
// it fits in one request or the request size is unknown (0).
uint64_t WholeRequests(uint64_t bytes, uint64_t request_bytes, bool nearest);

// Whether the scratch filesystem's `free_bytes` hold the records still to
// come, `size_hint` less `loaded_bytes`, uncompressed with a quarter to
// spare.
bool RoomForRawRuns(uint64_t size_hint, uint64_t loaded_bytes, uint64_t free_bytes);

// What the choice of uncompressed runs (SortPlan::raw_runs_if_disk_keeps_up)
// goes by, once the first run is written.
struct RawRunsInput {
  // The runs' writes so far (ScratchFileSystem::DirectWrites).
  uint64_t written_bytes = 0;
  double write_seconds = 0;
  // Record bytes loaded so far, and the load's wall time so far.
  uint64_t loaded_bytes = 0;
  double load_seconds = 0;
  // The data's estimated size, and the scratch filesystem's free space.
  uint64_t size_hint = 0;
  uint64_t free_bytes = 0;
};
// Whether the runs still to come are better written uncompressed: the disk
// wrote runs at least 1.25 times as fast as the load makes records, and
// the filesystem holds the records still to come uncompressed with a
// quarter to spare. A disk that writes records as fast as the load makes
// them cannot make the load slower with uncompressed runs (about 1.7x the
// bytes of LZ4's on real reads), which save the flushes' LZ4 and the final
// merge's (docs/benchmarks.md, "Design choices").
bool RawRunsPay(const RawRunsInput& in);

// The name -v gives a run compression: "lz4", "snappy", "zstd" or
// "uncompressed".
const char* RunCompressionName(rocksdb::CompressionType type);

// Human-readable summary of the plan's main numbers, for -v.
std::string DescribePlan(const SortPlan& plan);

}  // namespace rocksort::store

#endif  // ROCKSORT_STORE_OPTIONS_PLAN_INTERNAL_H_
