#include "store/options_plan_internal.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rocksdb/memtablerep.h"
#include "rocksdb/table.h"
#include "rocksdb/write_buffer_manager.h"
#include "store/run_memtable_internal.h"

namespace rocksort::store {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

// Never let RocksDB slow down or stop writes: the loader is the only writer
// and the DB is scratch, so a stall only wastes time.
constexpr int kNeverStall = 1 << 30;

// The budget is cut into two memtables, one filling while one is flushed,
// or into three where a third of it still makes memtables of
// kMinDirectWriteBuffer: two can then flush at once while the third fills.
// After loading, the same memory serves the merges down.
constexpr uint64_t kMemtablesInBudget = 2;
constexpr uint64_t kMemtablesInLargeBudget = 3;
// Memtables from which runs may be written with O_DIRECT (below).
constexpr uint64_t kMinDirectWriteBuffer = uint64_t{256} << 20;
// The largest write_buffer_size RocksDB takes (it clips larger ones when
// it opens the DB): a plan counting runs from more would count too few.
constexpr uint64_t kMaxWriteBuffer = uint64_t{64} << 30;

// Lower bound of the final merge's and the background merges' memory: a
// merge needs two blocks per run whatever the budget, and with a tiny -m a
// fan-in of 2 or 3 would rewrite the data log2(runs) times (measured: -m 1M
// on 830 MiB took 130 s in 1792 binary merges); 4 MiB reads 32 runs at
// once. Part of the fixed overhead stated in docs/design.md.
constexpr uint64_t kMinMergeBudget = 4 * kMiB;

// The page cache runs read ahead may hold: min(kMaxPageCache, kBasePageCache
// + 2 B). A machine short of memory (the benchmark's cgroup allows B + 384
// MiB) evicts what was read ahead before its reader gets to it, and the
// reads come from the disk again, a block at a time.
constexpr uint64_t kBasePageCache = 128 * kMiB;
constexpr uint64_t kMaxPageCache = 256 * kMiB;

// The final merge's lead is at most this many chunks.
constexpr uint64_t kFinalLeadChunks = 8;

// A run on disk holds about this much per byte of memtable: records are ~90%
// of a memtable and LZ4 keeps ~60% of real reads' bytes (zstd less).
constexpr double kRunBytesPerBuffered = 0.55;
// The same for a run written uncompressed (measured: 0.945).
constexpr double kRawRunBytesPerBuffered = 0.95;

// Memtables of fewer huge-page chunks than this keep their entries in
// RocksDB's arena (1 MiB blocks): with 2 MiB chunks the last one of a
// memtable would be a larger share of it.
constexpr uint64_t kMinChunksPerMemtable = 8;

// zstd's level for --run-compression zstd.
constexpr int kZstdRunLevel = 1;

// Of the descriptors the store may open, those kept out of RocksDB's table
// cache: MANIFEST, the files being written, the prefetch threads', the
// inputs reopened in turn, htslib's and libc's own.
constexpr uint64_t kReservedFiles = 64;

// a - b, or 0 when b > a.
uint64_t Minus(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

// `bytes` clamped to [lo, hi] and fitted down to whole device requests.
uint64_t FitChunk(uint64_t bytes, uint64_t lo, uint64_t hi, uint64_t request) {
  return std::max(lo, WholeRequests(std::clamp(bytes, lo, hi), request, /*nearest=*/false));
}

}  // namespace

const char* RunCompressionName(rocksdb::CompressionType type) {
  switch (type) {
    case rocksdb::kSnappyCompression:
      return "snappy";
    case rocksdb::kZSTD:
      return "zstd";
    case rocksdb::kNoCompression:
      return "uncompressed";
    default:
      return "lz4";
  }
}

SortPlan MakePlan(const PolicyInput& input) {
  SortPlan plan;
  const uint64_t budget = std::max<uint64_t>(input.memory_budget, kMiB);
  const int threads = std::max(1, input.threads);
  rocksdb::Options& o = plan.options;

  o.create_if_missing = true;
  o.error_if_exists = true;

  // Memtables: one being filled while one is flushed, each half the budget
  // (less a batch), or a third of it where that is kMinDirectWriteBuffer or
  // more: with two memtables of half the budget the loader waits for each
  // flush in turn (at -@ 2 -m 768M on the realistic input it waited 11.7 s
  // of a 24.8 s load, 5.6 s of 20.7 s with three: two flushes share the
  // cores while the third fills; docs/benchmarks.md). Not below:
  // more, smaller runs cost the final merge seeks on a rotating disk. The
  // write buffer manager (below) caps them together. The run
  // memtable (a vector memtable with a cache-friendly sort, run_memtable.h)
  // appends in O(1) and sorts once at flush time, which is exactly a
  // run-formation sort. Like RocksDB's VectorRep it does not support
  // concurrent inserts (DB::Open fails unless
  // allow_concurrent_memtable_write is false).
  plan.batch_bytes = std::min<uint64_t>(4 * kMiB, std::max<uint64_t>(budget / 16, 64 * kKiB));
  const uint64_t memtable_memory = budget - std::min(budget / 2, plan.batch_bytes);
  plan.memtables = memtable_memory / kMemtablesInLargeBudget >= kMinDirectWriteBuffer
                       ? kMemtablesInLargeBudget
                       : kMemtablesInBudget;
  // Above 3 x kMaxWriteBuffer of memtable memory (a budget over 192 GiB)
  // the runs are counted from the size RocksDB keeps; the write buffer
  // manager still caps all lanes' memtables together at the budget.
  o.write_buffer_size =
      std::clamp<uint64_t>(memtable_memory / plan.memtables, 256 * kKiB, kMaxWriteBuffer);
  // Three per lane, so that the write buffer manager's cap, not the count,
  // is what stops the loader: the count's own stop logs a warning each time
  // (hundreds with -v at -m 8M when one lane takes every run).
  o.max_write_buffer_number = 3;
  o.min_write_buffer_number_to_merge = 1;
  o.allow_concurrent_memtable_write = false;
  o.enable_write_thread_adaptive_yield = false;
  // At most 1 MiB: below the heap's block limit (common/allocator.h), so
  // the next memtable reuses the blocks of a flushed one from the heap
  // instead of mapping and faulting in fresh pages for all of its bytes.
  o.arena_block_size = std::clamp<uint64_t>(o.write_buffer_size / 8, 64 * kKiB, 1024 * kKiB);
  // max_write_buffer_number caps the memtables of one column family; with
  // lanes (below) a lane whose memtables still flush does not stop the
  // loader from filling the next one, so without a shared cap up to
  // lanes x 3 memtables could exist (measured: peak RSS 152 MiB instead of
  // 110 at -@ 2 -m 32M). The write buffer manager caps them all together
  // and stalls the loader, like the per-family cap did, until a flush frees
  // memory.
  o.write_buffer_manager = std::make_shared<rocksdb::WriteBufferManager>(budget, /*cache=*/nullptr,
                                                                         /*allow_stall=*/true);
  // Entries in huge-page chunks (huge_chunks_internal.h) where a memtable
  // holds enough of them that one chunk more or less does not change the
  // size of its run much: the memtable is sealed a chunk at a time.
  if (o.write_buffer_size >= kMinChunksPerMemtable * HugeChunkPool::kChunkBytes) {
    plan.memtable_chunks = std::make_shared<HugeChunkPool>();
  }
  plan.memtable_factory =
      std::make_shared<RunMemTableFactory>(plan.memtable_chunks, o.write_buffer_manager);
  o.memtable_factory = plan.memtable_factory;

  // LZ4 by default: about 11% less CPU for the whole sort than Snappy, for
  // runs 4% larger; zstd on request: runs about a third smaller than LZ4's
  // for more CPU (docs/design.md). Level 1: zstd's default (3) costs more
  // CPU again for runs barely smaller (docs/design.md).
  switch (input.run_compression) {
    case RunCompression::kAuto:
    case RunCompression::kLz4:
      o.compression = rocksdb::kLZ4Compression;
      break;
    case RunCompression::kSnappy:
      o.compression = rocksdb::kSnappyCompression;
      break;
    case RunCompression::kZstd:
      o.compression = rocksdb::kZSTD;
      o.compression_opts.level = kZstdRunLevel;
      break;
    case RunCompression::kNone:
      o.compression = rocksdb::kNoCompression;
      break;
  }
  plan.merged_compression = o.compression;
  o.level0_slowdown_writes_trigger = kNeverStall;
  o.level0_stop_writes_trigger = kNeverStall;
  o.soft_pending_compaction_bytes_limit = 0;
  o.hard_pending_compaction_bytes_limit = 0;
  // Table readers: all kept open (-1) when descriptors are plentiful; under
  // an open-file limit RocksDB's table cache holds at most that many (minus
  // its own 10) and reopens evicted ones, and the merges below read at most
  // half of them at once. Without the cap, ~400 runs under a limit of 256
  // failed with "Too many open files" while loading.
  const uint64_t usable_files = input.open_files > 2 * kReservedFiles
                                    ? input.open_files - kReservedFiles
                                    : input.open_files / 2;
  const bool unlimited_files = usable_files == 0 || usable_files > (1u << 30);
  o.max_open_files = unlimited_files ? -1 : static_cast<int>(usable_files);
  const uint64_t readable_runs = unlimited_files ? uint64_t{1} << 20 : usable_files / 2;
  o.avoid_flush_during_shutdown = true;  // The DB is destroyed anyway.
  // No preallocation: closing a preallocated run truncates its unused
  // tail, and on a filesystem mounted with `discard` that waits for the
  // device in the flush or merge thread (ext4 allocates delayed anyway).
  o.allow_fallocate = false;
  o.use_fsync = false;
  // Write runs back to disk as they are written (sync_file_range every MiB),
  // so that their pages are clean and the page cache can drop the merged
  // ones at once (BackgroundMerger) instead of waiting for writeback.
  o.bytes_per_sync = 1 * kMiB;
  o.paranoid_checks = true;
  o.max_manifest_file_size = 64 * kMiB;
  // Every table file is opened with POSIX_FADV_RANDOM (advise_random_on_open,
  // RocksDB's default, stated here because the next line relies on it) and
  // keeps it: RocksDB's own readahead, sized to whole device requests
  // below, then decides every read. The default hint NORMAL on compaction
  // inputs re-enabled the kernel's readahead, whose windows overlap
  // RocksDB's reads and split them into odd-sized requests (measured: 674 KiB
  // per request on average for 948 KiB reads).
  o.advise_random_on_open = true;
  o.access_hint_on_compaction_start = rocksdb::Options::NONE;
  o.max_background_jobs = std::max(2, threads);
  o.max_background_flushes = std::max(1, threads / 2 + 1);

  rocksdb::BlockBasedTableOptions table;
  // Iterators own their blocks: there is no shared cache to size, and the
  // final merge reads every block exactly once anyway.
  table.no_block_cache = true;
  // 64 KiB on both profiles: readahead, not the block size, decides the
  // size of a disk read, and every open run holds two blocks in memory.
  table.block_size = 64 * kKiB;
  table.filter_policy = nullptr;  // Point lookups never happen.
  table.cache_index_and_filter_blocks = false;
  // XXH3: Debian's portable RocksDB build computes CRC32c in software
  // (Slow_CRC32 showed up at 2% of all CPU in profiles); XXH3 is far faster.
  table.checksum = rocksdb::kXXH3;
  // The final merge reads the runs' blocks itself (run_reader_internal.h),
  // in this format version's layout: pinned, not left to RocksDB's default.
  table.format_version = 5;
  table.index_type = rocksdb::BlockBasedTableOptions::kBinarySearch;
  // RocksDB never reads ahead itself (neither a buffer per run nor its
  // implicit readahead): store/prefetch_fs_internal.h keeps each run's
  // reader a chunk ahead in the page cache.
  table.max_auto_readahead_size = 0;
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));

  // Universal compaction over one level: every run is a level-0 file and a
  // merge (DB::CompactFiles, picked by rocksort) turns adjacent runs into
  // one. rocksort picks the merges itself (BackgroundMerger, oldest fresh
  // runs first); RocksDB's universal picker, which starts from the newest
  // runs, never runs.
  o.compaction_style = rocksdb::kCompactionStyleUniversal;
  o.num_levels = 1;
  o.disable_auto_compactions = true;
  // Merges read no readahead of RocksDB's own either: the prefetch file
  // system reads their inputs ahead.
  o.compaction_readahead_size = 0;

  // How runs are read. A rotating disk seeks for ~8 ms, the time to
  // transfer ~1.4 MiB at 180 MB/s: chunks of 512 KiB keep the requests of
  // the largest final merge (4.4 GB of runs in ~75 s) near half of what such
  // a disk serves per second; 2 MiB is where the kernel cuts reads anyway.
  // An SSD does well with 128 KiB. Compaction off means what it says: the
  // final merge reads the flushed runs directly, in chunks down to one
  // block, and merges first only what memory or the open files cannot hold.
  const bool hdd = input.disk == DiskKind::kHdd;
  plan.request_bytes = input.request_bytes;
  plan.run_resident_bytes = 2 * table.block_size;
  plan.page_cache_budget = std::min(kMaxPageCache, kBasePageCache + 2 * budget);
  plan.min_chunk = input.allow_compaction ? (hdd ? 512 * kKiB : 128 * kKiB) : table.block_size;
  plan.max_chunk = WholeRequests(hdd ? 2 * kMiB : 1 * kMiB, plan.request_bytes, false);
  // Enough that the next chunk arrives before the reader needs it: a run is
  // consumed at a few hundred KiB per second in a merge of hundreds of runs.
  plan.lead = std::min<uint64_t>(plan.min_chunk, hdd ? 128 * kKiB : 64 * kKiB);

  // At most a few merges at a time while loading.
  plan.background_merges = std::clamp(threads / 2, 1, 3);
  const uint64_t compaction_memory = std::max<uint64_t>(budget / 4, kMinMergeBudget);

  // The final merge reads what its memory, the page cache and the open
  // files allow (the memtables are flushed and freed by then; the rest of
  // the budget holds the BGZF blocks in flight).
  plan.merge_budget = std::max(budget / 4 * 3, kMinMergeBudget);
  plan.max_final_runs = static_cast<int>(
      std::clamp<uint64_t>(std::min({plan.merge_budget / plan.run_resident_bytes, readable_runs,
                                     plan.page_cache_budget / (plan.min_chunk + plan.lead)}),
                           2, 4096));

  // Background merges: each lane's oldest fresh runs, f to F at a time.
  plan.expected_runs =
      input.size_hint == 0 ? 0 : (input.size_hint + o.write_buffer_size - 1) / o.write_buffer_size;
  const bool planned = input.allow_compaction && input.size_hint != 0 &&
                       plan.expected_runs > static_cast<uint64_t>(plan.max_final_runs);
  const double ratio = input.size_hint == 0
                           ? 64.0  // Unknown size: plan for data ~64x the final fan-in.
                           : static_cast<double>(plan.expected_runs) / plan.max_final_runs;
  // A second merge at a time from -@ 2 on when the size is known to need
  // more than one merge's fan-in (the loader waits for the merges, and gets
  // the core one merge leaves idle).
  const auto memory_fan_in_of = [&](int merges) {
    return static_cast<int>(
        std::clamp<uint64_t>(std::min(compaction_memory / merges / plan.run_resident_bytes,
                                      readable_runs / static_cast<uint64_t>(merges)),
                             2, 1024));
  };
  if (threads >= 2 && plan.background_merges < 2 && input.size_hint != 0 &&
      ratio > memory_fan_in_of(plan.background_merges)) {
    plan.background_merges = 2;
  }

  // Lanes: one per thread, at most 4, so that flushes run side by side and
  // after loading each lane is merged down by its own thread. Where every
  // fresh run is merged while loading, one per merge at a time instead: the
  // fresh runs waiting for a merge share the page cache, and split over
  // more lanes than merges each lane's share holds only about one merge's
  // width, so the loader waited for every merge (-@ 2 -m 8M on the
  // realistic input: 41 s of a 79 s load with two lanes, 19 s of 69 s with
  // one).
  plan.lanes = planned ? plan.background_merges : std::clamp(threads, 1, 4);
  plan.max_final_runs_per_lane = std::max(1, plan.max_final_runs / plan.lanes);

  // After loading, the memory the memtables and background merges used is
  // free for the merges down to K runs, one per lane at once (within a lane
  // RocksDB refuses a second merge into level 0 over overlapping keys).
  plan.post_load_memory = o.write_buffer_size * plan.memtables + compaction_memory;
  plan.merge_down_fan_in = static_cast<int>(std::clamp<uint64_t>(
      std::min({plan.post_load_memory / plan.lanes / plan.run_resident_bytes,
                readable_runs / plan.lanes,
                plan.page_cache_budget / plan.lanes / (plan.min_chunk + plan.lead)}),
      2, 4096));
  plan.merge_down_readahead = {
      FitChunk(Minus(plan.page_cache_budget / plan.lanes / plan.merge_down_fan_in, plan.lead),
               plan.min_chunk, plan.max_chunk, plan.request_bytes),
      plan.lead};

  // Fresh runs must still be in the page cache when they are merged: the
  // loader waits once a lane holds more fresh runs than one merge takes
  // (BackgroundMerger::AwaitBacklog), so what the lanes hold waiting, at
  // about kRunBytesPerBuffered of a memtable each on disk, stays within the
  // page cache budget. (Merges that took whatever had piled up, up to what
  // their memory holds, lagged behind the flushes, and read the runs back
  // from the disk: 49.6 s instead of 36 s of loading at -@ 2 -m 8M.)
  // Where the size says every fresh run is merged while loading, the fresh
  // runs are written uncompressed and only the merged runs compressed: a
  // fresh run is read once, by a merge seconds later, from the page cache,
  // so compressing it saves no reads, only costs LZ4 in the flush and again
  // in the merge (~45% of their CPU time, profiled at -m 8M). Where some
  // fresh runs may reach the final merge unmerged (size unknown, or no
  // merges planned), they stay compressed.
  plan.fresh_runs_merged = planned;
  if (plan.fresh_runs_merged) o.compression = rocksdb::kNoCompression;
  const double run_bytes_per_buffered =
      o.compression == rocksdb::kNoCompression ? kRawRunBytesPerBuffered : kRunBytesPerBuffered;
  const uint64_t run_on_disk = static_cast<uint64_t>(run_bytes_per_buffered * o.write_buffer_size);
  const int cache_fan_in = static_cast<int>(std::max<uint64_t>(
      2, plan.page_cache_budget / (plan.lanes * std::max<uint64_t>(1, run_on_disk))));
  plan.merge_max_fan_in = std::min(memory_fan_in_of(plan.background_merges), cache_fan_in);
  plan.merge_fan_in = std::clamp(static_cast<int>(std::ceil(std::max(ratio, 1.0))), 2,
                                 std::max(2, plan.merge_max_fan_in));
  plan.merge_max_fan_in = std::max(plan.merge_max_fan_in, plan.merge_fan_in);
  // Fresh runs are still in the page cache when they are merged (the loader
  // waits for the merges), so a small chunk does: what a merge reads from
  // the disk it reads with the lead as its chunk.
  plan.background_readahead = {
      FitChunk(plan.page_cache_budget / plan.background_merges / plan.merge_max_fan_in, plan.lead,
               plan.max_chunk, plan.request_bytes),
      plan.lead / 2};

  if (!input.allow_compaction) {
    plan.compaction = CompactionMode::kOff;
  } else if (input.size_hint == 0) {
    plan.compaction = CompactionMode::kAdaptive;
    plan.adaptive_trigger_runs = plan.max_final_runs;
  } else if (plan.expected_runs > static_cast<uint64_t>(plan.max_final_runs)) {
    plan.compaction = CompactionMode::kPlanned;
  } else {
    plan.compaction = CompactionMode::kOff;  // The final merge reads every run well.
  }
  // Large runs that only the final merge reads, once, are written past the
  // page cache (O_DIRECT, where the file system takes it: TempDb): the
  // kernel's copy of every run into the cache cost the flushes ~10 of their
  // ~36 CPU s at -m 768M on the realistic input, for pages the final merge
  // reads ahead from the disk anyway. Merges while loading read their fresh
  // runs from the cache, and hundreds of small runs written direct were
  // read back in 40-50% more requests (emulated HDD, -m 32M), so both stay
  // buffered.
  o.use_direct_io_for_flush_and_compaction =
      plan.compaction == CompactionMode::kOff &&
      plan.expected_runs <= static_cast<uint64_t>(plan.max_final_runs) &&
      o.write_buffer_size >= kMinDirectWriteBuffer;
  // The same few large runs: the last memtables stay in memory for the
  // final merge, which then starts without waiting for their flush (1.6 s
  // of the load's end at -m 768M on the realistic input, one core idle).
  // Not with smaller memtables: kept through the emit phase in a memory
  // cgroup, they took the page cache the final merge's chunks are read
  // ahead into (docs/design.md, Settle).
  plan.final_merge_reads_memtables = o.use_direct_io_for_flush_and_compaction;
  // The same few large runs, read once by the final merge, uncompressed
  // while the disk writes them well ahead of the load: there LZ4 is CPU
  // spent for bytes the disk had time for. They start uncompressed (the
  // store compresses from the start where the filesystem lacks the room),
  // and the store turns the run compression on once the first run shows a
  // disk falling behind (store.cc, MaybeChangeRunCompression): LZ4 on the
  // first runs until then was the one LZ4 left in the profile of a sort
  // whose disk kept up, 0.9% of its CPU at -m 768M.
  plan.raw_runs_if_disk_keeps_up = input.run_compression == RunCompression::kAuto &&
                                   o.use_direct_io_for_flush_and_compaction &&
                                   o.compression != rocksdb::kNoCompression;
  if (plan.raw_runs_if_disk_keeps_up) o.compression = rocksdb::kNoCompression;
  return plan;
}

uint64_t WholeRequests(uint64_t bytes, uint64_t request_bytes, bool nearest) {
  if (request_bytes == 0 || bytes <= request_bytes) return bytes;
  const uint64_t whole =
      nearest ? (bytes + request_bytes / 2) / request_bytes : bytes / request_bytes;
  return std::max<uint64_t>(1, whole) * request_bytes;
}

Readahead FinalReadahead(const SortPlan& plan, int runs) {
  const uint64_t share = plan.page_cache_budget / std::max(1, runs);
  const uint64_t chunk =
      FitChunk(Minus(share, plan.lead), plan.min_chunk, plan.max_chunk, plan.request_bytes);
  // What the share holds beyond its chunk deepens the lead: a few runs, each
  // consumed at a few MB/s, then ride out a disk busy writing the output
  // for a second or more (a lead of 64 KiB lasts ~20 ms there).
  return {chunk, std::clamp(Minus(share, chunk), plan.lead, kFinalLeadChunks * chunk)};
}

bool RoomForRawRuns(uint64_t size_hint, uint64_t loaded_bytes, uint64_t free_bytes) {
  const uint64_t to_come = size_hint > loaded_bytes ? size_hint - loaded_bytes : 0;
  return free_bytes >= to_come + to_come / 4;
}

bool RawRunsPay(const RawRunsInput& in) {
  // At 1.25, a load the raw runs make wait for the disk still takes at
  // most 0.8x the time of the load just measured.
  constexpr double kRawRunsDiskMargin = 1.25;
  if (in.written_bytes == 0 || in.write_seconds <= 0 || in.load_seconds <= 0) return false;
  const double write_rate = static_cast<double>(in.written_bytes) / in.write_seconds;
  const double load_rate = static_cast<double>(in.loaded_bytes) / in.load_seconds;
  if (write_rate < kRawRunsDiskMargin * load_rate) return false;
  return RoomForRawRuns(in.size_hint, in.loaded_bytes, in.free_bytes);
}

uint64_t ExpectedScratchPeak(uint64_t size_hint, RunCompression compression) {
  switch (compression) {
    case RunCompression::kZstd:
      return size_hint / 2;
    case RunCompression::kNone:
      return size_hint + size_hint / 2;
    default:
      return size_hint / 2 + size_hint / 4;
  }
}

std::string DescribePlan(const SortPlan& plan) {
  const rocksdb::Options& o = plan.options;
  // The background merges' numbers only where they run.
  std::string compaction = "off";
  if (plan.compaction != CompactionMode::kOff) {
    compaction =
        absl::StrFormat("%s (%d merge(s) at a time, fan-in %d..%d, chunks of %d KiB%s)",
                        plan.compaction == CompactionMode::kPlanned ? "planned" : "adaptive",
                        plan.background_merges, plan.merge_fan_in, plan.merge_max_fan_in,
                        plan.background_readahead.chunk / 1024,
                        plan.compaction == CompactionMode::kAdaptive
                            ? absl::StrCat(", starts after ", plan.adaptive_trigger_runs, " runs")
                            : std::string());
  }
  // What --run-compression auto may still change (store.cc,
  // MaybeChangeRunCompression).
  std::string disk_choice;
  if (plan.raw_runs_if_disk_keeps_up) {
    disk_choice = o.compression == rocksdb::kNoCompression
                      ? absl::StrCat(" (", RunCompressionName(plan.merged_compression),
                                     " if the disk falls behind)")
                      : std::string(" (uncompressed if the disk keeps up)");
  }
  return absl::StrFormat(
      "write_buffer_size=%d (%d memtables), %s fresh runs%s, %s merged runs, %d lane(s), "
      "expected runs %s, compaction %s, runs written %s, merges after loading fan-in <= %d, "
      "final merge <= %d runs (chunks of %d..%d KiB, page cache <= %d MiB)",
      o.write_buffer_size, plan.memtables, RunCompressionName(o.compression), disk_choice,
      RunCompressionName(plan.merged_compression), plan.lanes,
      plan.expected_runs == 0 ? std::string("unknown") : absl::StrCat(plan.expected_runs),
      compaction,
      o.use_direct_io_for_flush_and_compaction ? "direct (O_DIRECT)" : "through the page cache",
      plan.merge_down_fan_in, plan.max_final_runs, plan.min_chunk / 1024, plan.max_chunk / 1024,
      plan.page_cache_budget >> 20);
}

}  // namespace rocksort::store
