#include "store/options_plan_internal.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "store/run_memtable_internal.h"
#include "rocksdb/memtablerep.h"
#include "rocksdb/table.h"
#include "rocksdb/write_buffer_manager.h"

namespace rocksort::store {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

// Never let RocksDB slow down or stop writes: the loader is the only writer
// and the DB is scratch, so a stall only wastes time.
constexpr int kNeverStall = 1 << 30;

// Lower bound of the final merge's and the background compactions' memory;
// see MakePlan.
constexpr uint64_t kMinMergeBudget = 16 * kMiB;
// Readahead per input of a background merge, whose inputs are in the page
// cache (see MakePlan).
constexpr uint64_t kBackgroundReadahead = 128 * kKiB;
// The final merge's memory is at least what this many runs per lane take at
// the profile's seek floor (below); at a smaller readahead the same memory
// reads more runs.
constexpr uint64_t kMinFinalRunsPerLane = 8;

// zstd's level for --run-compression zstd.
constexpr int kZstdRunLevel = 1;

const char* RunCompressionName(rocksdb::CompressionType type) {
  switch (type) {
    case rocksdb::kSnappyCompression:
      return "snappy";
    case rocksdb::kZSTD:
      return "zstd";
    default:
      return "lz4";
  }
}

// What the emit phase consumes per thread: BGZF compression at samtools' level
// turns about this many bytes of sorted runs (Snappy, ~0.49 of the records;
// LZ4 ~0.51) per second per core into output on the benchmark machine (3.44
// GB of final runs in 65 s at -@ 2, docs/benchmarks.md). zstd runs (~0.35)
// are consumed more slowly, so for them the readahead this implies is ample.
constexpr double kEmitRunBytesPerThread = 26e6;
// The final merge's reads must deliver this much more than the emit phase
// consumes: room for faster cores and for the merge's own pauses.
constexpr double kFeedHeadroom = 1.5;

// The smallest readahead per run, in bytes, with which a disk of seek time
// `seek_s` and bandwidth `bandwidth` (bytes/s) delivers `rate` bytes/s to a
// merge that reads its runs in turn: a read of R bytes takes seek + R /
// bandwidth, so R / (seek + R / bandwidth) >= rate when R >= rate x seek /
// (1 - rate / bandwidth). Infinite when the disk cannot deliver the rate.
double FeedingReadahead(double rate, double seek_s, double bandwidth) {
  if (rate >= bandwidth) return std::numeric_limits<double>::infinity();
  return rate * seek_s / (1.0 - rate / bandwidth);
}

// Descriptors kept out of RocksDB's table cache: stdio, the input, the
// output, LOG, MANIFEST, the files being written, htslib's and libc's own.
constexpr uint64_t kReservedFiles = 64;

// A readahead whose reads (readahead + up to `slack`) fill whole requests of
// `request` bytes (WholeRequests).
size_t FitToRequests(uint64_t readahead, uint64_t request, uint64_t slack, bool nearest) {
  if (request <= slack) return static_cast<size_t>(readahead);
  return static_cast<size_t>(WholeRequests(readahead + slack, request, nearest) - slack);
}

// Readahead per input when `inputs` runs share `memory` and each also holds
// `blocks` bytes of blocks: what is left of its share, clamped to [lo, hi],
// then fitted down to whole requests.
size_t ReadaheadPerInput(const SortPlan& plan, uint64_t memory, int inputs, uint64_t blocks,
                         size_t lo, size_t hi) {
  const uint64_t share = memory / std::max(1, inputs);
  const uint64_t readahead = std::clamp<uint64_t>(share > blocks ? share - blocks : 0, lo, hi);
  return FitToRequests(readahead, plan.request_bytes, plan.read_slack, /*nearest=*/false);
}

}  // namespace

SortPlan MakePlan(const PolicyInput& input) {
  SortPlan plan;
  const uint64_t budget = std::max<uint64_t>(input.memory_budget, kMiB);
  const int threads = std::max(1, input.threads);
  rocksdb::Options& o = plan.options;

  o.create_if_missing = true;
  o.error_if_exists = true;

  // Memtables: one being filled, up to two being flushed, each budget/4, so
  // memtables stay within 3/4 of the budget. The run memtable (a vector
  // memtable with a cache-friendly sort, run_memtable.h) appends in O(1) and
  // sorts once at flush time, which is exactly a run-formation sort. Like
  // RocksDB's VectorRep it does not support concurrent inserts (DB::Open
  // fails unless allow_concurrent_memtable_write is false).
  o.write_buffer_size = std::max<uint64_t>(budget / 4, 256 * kKiB);
  o.max_write_buffer_number = 3;
  o.min_write_buffer_number_to_merge = 1;
  o.memtable_factory = std::make_shared<RunMemTableFactory>();
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
  o.write_buffer_manager = std::make_shared<rocksdb::WriteBufferManager>(
      o.write_buffer_size * o.max_write_buffer_number, /*cache=*/nullptr, /*allow_stall=*/true);

  // LZ4 by default: about 11% less CPU for the whole sort than Snappy, for
  // runs 4% larger; zstd on request: runs about a third smaller than LZ4's
  // for more CPU (docs/design.md). Level 1: zstd's default (3) costs more
  // CPU again for runs barely smaller (docs/design.md).
  switch (input.run_compression) {
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
  }
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
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));

  // Readahead per run. The seek floor: on a rotating disk a seek costs ~8 ms,
  // the time to transfer ~1.4 MiB at 180 MB/s, so reads of 2 MiB keep seeks
  // below 40% of the disk's time however the reads interleave (RocksDB's
  // tuning guide asks for at least 2 MiB there); an SSD needs 256 KiB.
  // The merges after loading read in smaller chunks, down to
  // min_merge_readahead (background merges even smaller ones, below): they are
  // CPU-bound (one thread merges on the order of 100 MB/s of runs on the
  // benchmark machine), 1 MiB reads still deliver ~75 MB/s from a disk, and
  // the memory saved buys a wider fan-in, i.e. fewer rewrites of every record.
  double seek_s = 0.0001;
  double bandwidth = 1e9;
  uint64_t seek_floor = 256 * kKiB;
  if (input.disk == DiskKind::kHdd) {
    seek_s = 0.008;
    bandwidth = 180e6;
    seek_floor = 2 * kMiB;
    plan.max_readahead = 16 * kMiB;
    plan.min_merge_readahead = 1 * kMiB;
  } else {
    plan.max_readahead = 4 * kMiB;
    plan.min_merge_readahead = 256 * kKiB;
  }
  // The final merge does not need the seek floor when fewer bytes per second
  // suffice: it only has to keep up with the emit phase, which is bound by BGZF
  // compression. Reads of FeedingReadahead bytes supply kFeedHeadroom times
  // what the emit phase's threads consume, so at -@ 1-2 a disk's 1 MiB reads
  // do (75-78 MB/s against 26-52 MB/s), at -@ 3 and more the floor stays
  // (larger reads than 2 MiB are cut into 2 MiB pieces by the kernel, and
  // cost final runs). Every run fewer at the final merge is merging before
  // it: with 1 MiB reads -@ 2 -m 8M reads 31 runs at the end instead of 16
  // in the same memory, write amplification 2.91 instead of 3.10, and
  // -m 32M 45 instead of 23, 2.21 instead of 2.34 (2 GiB BAM, emulated HDD,
  // docs/benchmarks.md, seventh and eighth sessions).
  plan.min_readahead = static_cast<size_t>(std::clamp<double>(
      FeedingReadahead(kFeedHeadroom * kEmitRunBytesPerThread * threads, seek_s, bandwidth),
      plan.min_merge_readahead, seek_floor));
  // Whole requests: the floors to the nearest number of them (1964 KiB and
  // 948 KiB for a 1016 KiB request; a floor may so grow by up to half a
  // request, which the memory below accounts for), the ceiling down.
  plan.request_bytes = input.request_bytes;
  plan.read_slack = table.block_size + 4 * kKiB;  // A block (+ trailer) and page alignment.
  seek_floor = FitToRequests(seek_floor, plan.request_bytes, plan.read_slack, /*nearest=*/true);
  plan.min_readahead =
      FitToRequests(plan.min_readahead, plan.request_bytes, plan.read_slack, /*nearest=*/true);
  plan.min_merge_readahead = FitToRequests(plan.min_merge_readahead, plan.request_bytes,
                                           plan.read_slack, /*nearest=*/true);
  plan.max_readahead = std::max(
      plan.min_readahead,
      FitToRequests(plan.max_readahead, plan.request_bytes, plan.read_slack, /*nearest=*/false));
  const uint64_t blocks = 2 * table.block_size;  // Compressed and decoded block per run.
  // Compaction off (--no-compaction, -s 0) means what it says: the final
  // merge reads the flushed runs directly, at whatever readahead its memory
  // leaves per run, down to one block (reads of two blocks), and runs are
  // merged beforehand only when even that does not fit (memory or open
  // files). Every record is then written once, which is fastest where seeks
  // are cheap; on a rotating disk such small reads make the final merge
  // seek-bound, which is what the size-driven modes avoid by merging down
  // to runs read at the seek floor.
  if (!input.allow_compaction) plan.min_readahead = table.block_size;

  plan.batch_bytes = std::min<uint64_t>(4 * kMiB, std::max<uint64_t>(budget / 16, 64 * kKiB));

  // Universal compaction over one level: every run is a level-0 file and a
  // merge (DB::CompactFiles, picked by rocksort) turns adjacent runs into
  // one.
  o.compaction_style = rocksdb::kCompactionStyleUniversal;
  o.num_levels = 1;
  // At most a few merges at a time while loading: each holds readahead per
  // input (one more below when a round of merges cannot reach K anyway).
  plan.background_merges = std::clamp(threads / 2, 1, 3);
  // Memory of all background compactions together. The floor exists
  // because a merge needs a block or two per run whatever the budget: with a
  // tiny -m a fan-in of 2 or 3 would rewrite the data log2(runs) times
  // (measured: -m 1M on 830 MiB took 130 s in 1792 binary merges). It is
  // part of the fixed overhead stated in docs/design.md.
  const uint64_t compaction_memory = std::max<uint64_t>(budget / 4, kMinMergeBudget);

  // One lane per thread, at most 4: after loading, each lane is merged down
  // by its own thread.
  plan.lanes = std::clamp(threads, 1, 4);
  // The final merge gets three quarters of the budget (the memtables are
  // flushed and freed by then; the last quarter holds the emit phase's BGZF
  // pool), but at least enough to read kMinFinalRunsPerLane runs from every
  // lane at the seek floor (twice as many at a 1 MiB min_readahead), and
  // never less than kMinMergeBudget: a merge needs a block or two per run
  // whatever the budget, and every final run fewer means more merging
  // before it. Half the budget (K = 16 instead of 23 at
  // -@ 2 -m 32M on a disk) left more background-merged runs per lane than the
  // final merge could read, so the merges after loading rewrote most of them:
  // write amplification 2.53 instead of 2.35, and 18.5-25 s instead of 15 s of
  // merging after loading, on the 2 GiB benchmark (docs/benchmarks.md).
  plan.merge_budget = std::max({budget / 4 * 3, kMinMergeBudget,
                                plan.lanes * kMinFinalRunsPerLane * (seek_floor + blocks)});
  plan.max_final_runs = static_cast<int>(std::clamp<uint64_t>(
      std::min(plan.merge_budget / (plan.min_readahead + blocks), readable_runs), 2, 4096));
  plan.max_final_runs_per_lane = plan.max_final_runs / plan.lanes;
  // After loading, the memory the memtables and background compactions used
  // is free for the merges down to K runs.
  plan.post_load_memory = o.write_buffer_size * o.max_write_buffer_number + compaction_memory;
  // The lanes' merges after loading run at once and share the memory: each
  // is as wide as its share holds at min_merge_readahead per input. (Within
  // a lane they run one at a time: RocksDB refuses a second CompactFiles
  // into the same level over an overlapping key range, and its own universal
  // picker, run after loading, rewrote the data 7 times instead of 3.5: it
  // merges newer runs into the accumulated older ones.)
  const uint64_t lane_memory = plan.post_load_memory / plan.lanes;
  plan.merge_down_fan_in = static_cast<int>(std::clamp<uint64_t>(
      std::min(lane_memory / (plan.min_merge_readahead + blocks), readable_runs / plan.lanes), 2,
      4096));
  plan.merge_down_readahead = ReadaheadPerInput(plan, lane_memory, plan.merge_down_fan_in, blocks,
                                                plan.min_merge_readahead, plan.max_readahead);

  // The runs one background merge can take when `merges` run at once: what
  // its share of the compaction memory holds at min_background_readahead per
  // input.
  const auto memory_fan_in_of = [&](int merges) {
    return static_cast<int>(std::clamp<uint64_t>(
        std::min(compaction_memory / merges / (plan.min_background_readahead + blocks),
                 readable_runs / static_cast<uint64_t>(merges)),
        2, 1024));
  };
  plan.expected_runs = input.size_hint == 0 ? 0 : (input.size_hint + o.write_buffer_size - 1) /
                                                      o.write_buffer_size;
  const double ratio = input.size_hint == 0
                           ? 64.0  // Unknown size: plan for data ~64x the final fan-in.
                           : static_cast<double>(plan.expected_runs) / plan.max_final_runs;
  // Background merges read runs flushed moments ago, which are still in the
  // page cache (the loader waits for the merger, AwaitBacklog, and what is
  // merged or read leaves the cache at once: docs/design.md), so their
  // reads cost no seeks, and when one merge at min_merge_readahead cannot
  // take T / K runs, 128 KiB reads buy the fan-in. At -@ 2 -m 8M on the
  // 2 GiB benchmark (emulated HDD), 128 KiB instead of 948 KiB per input
  // let one merge take 54-64 fresh runs instead of two merges 7: write
  // amplification 2.08 instead of 2.87, 313 instead of 332 CPU s, 5807
  // instead of 8480 MiB read from the disk, 178.4 s instead of 186.3 s (one
  // run each, thirteenth session); two merges of 32 runs: 2.40, 184.3 s.
  // When the fan-in is there anyway (-m 32M: 15 runs at 948 KiB for T / K =
  // 9.3) the larger reads stay, and keep a merge fast should its inputs
  // have left the cache. So do they for an unknown size (a pipe), whose
  // ratio is a guess and which was not measured with the smaller reads.
  plan.min_background_readahead = plan.min_merge_readahead;
  if (input.size_hint != 0 && ratio > memory_fan_in_of(1)) {
    plan.min_background_readahead = std::min<size_t>(
        plan.min_merge_readahead,
        FitToRequests(kBackgroundReadahead, plan.request_bytes, plan.read_slack, /*nearest=*/true));
  }
  // A second merge at a time from -@ 2 on, when the size is known to need
  // more than one round (T / K above what one merge takes): the merges after
  // loading finish the job anyway, so two narrower merges lose little, and
  // the loader, which waits for the merger (AwaitBacklog), gets the core it
  // left idle. Measured on the 2 GiB benchmark at -@ 2 -m 8M on the emulated
  // disk (T / K = 54, F = 15), three runs each: load 48-58 s instead of
  // 61-64 s, merges after loading 25 s instead of 22 s, 170 s instead of
  // 179 s in all (medians), write amplification 2.87 instead of 2.67. At
  // -m 32M (T / K = 9.3, one round) two merges cost 9 s: each merge half as
  // wide, the merges after loading took 8.8 s instead of 1.1 s. An unknown
  // size (ratio 64 is a guess) keeps one. (Those figures predate the 128 KiB
  // background reads, with which one merge takes T / K runs at -m 8M too.)
  if (threads >= 2 && plan.background_merges < 2 && input.size_hint != 0 &&
      ratio > memory_fan_in_of(plan.background_merges)) {
    plan.background_merges = 2;
  }
  const uint64_t compaction_budget = compaction_memory / plan.background_merges;
  const int memory_fan_in = memory_fan_in_of(plan.background_merges);
  // Background compaction makes one round over the memtable-sized runs, f
  // at a time, while they are still in the page cache: f = T / K reaches K
  // runs directly. When memory caps f below that, about T / f merged runs
  // remain, and the merges after loading (which read them back from disk)
  // take them to K in one more round. (Per lane it is the same ratio: T /
  // lanes runs to K / lanes.) The earlier rule f = sqrt(T / K), two
  // background rounds, left more of the second round to the merges after
  // loading, which wrote more in all (write amplification 3.41 instead of
  // 3.17 at -@ 2 -m 8M, 2.57 instead of 2.31 at -m 32M, on the 2 GiB
  // benchmark on the emulated disk). The inputs share the
  // compaction memory: readahead per input is what is left after the
  // blocks, at least min_merge_readahead.
  plan.merge_fan_in = std::clamp(static_cast<int>(std::ceil(std::max(ratio, 1.0))), 2,
                                 memory_fan_in);
  // A merge takes at least f runs and, when more fresh runs have piled up
  // since the lane's last merge (the merger lags behind fast flushes), all of
  // them up to what memory holds: fewer, larger runs for the final merge.
  plan.merge_max_fan_in = memory_fan_in;
  o.compaction_readahead_size =
      ReadaheadPerInput(plan, compaction_budget, plan.merge_max_fan_in, blocks,
                        plan.min_background_readahead, plan.max_readahead);
  // rocksort picks the merges itself (pipeline::BackgroundMerger, oldest
  // fresh runs first, DB::CompactFiles); RocksDB's universal picker, which
  // starts from the newest runs, never runs.
  o.disable_auto_compactions = true;

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
  return plan;
}

uint64_t WholeRequests(uint64_t bytes, uint64_t request_bytes, bool nearest) {
  if (request_bytes == 0 || bytes <= request_bytes) return bytes;
  const uint64_t whole =
      nearest ? (bytes + request_bytes / 2) / request_bytes : bytes / request_bytes;
  return std::max<uint64_t>(1, whole) * request_bytes;
}

size_t FinalReadahead(const SortPlan& plan, int runs) {
  const auto* table =
      plan.options.table_factory->GetOptions<rocksdb::BlockBasedTableOptions>();
  const uint64_t blocks = table != nullptr ? 2 * table->block_size : 0;
  return ReadaheadPerInput(plan, plan.merge_budget, runs, blocks, plan.min_readahead,
                           plan.max_readahead);
}

uint64_t ExpectedScratchPeak(uint64_t size_hint, RunCompression compression) {
  return compression == RunCompression::kZstd ? size_hint / 2 : size_hint / 2 + size_hint / 4;
}

std::string DescribePlan(const SortPlan& plan) {
  const rocksdb::Options& o = plan.options;
  // The background merges' numbers only where they run.
  std::string compaction = "off";
  if (plan.compaction != CompactionMode::kOff) {
    compaction = absl::StrFormat(
        "%s (%d merge(s) at a time, fan-in %d..%d, readahead %d KiB%s)",
        plan.compaction == CompactionMode::kPlanned ? "planned" : "adaptive",
        plan.background_merges, plan.merge_fan_in, plan.merge_max_fan_in,
        o.compaction_readahead_size / 1024,
        plan.compaction == CompactionMode::kAdaptive
            ? absl::StrCat(", starts after ", plan.adaptive_trigger_runs, " runs")
            : std::string());
  }
  return absl::StrFormat(
      "write_buffer_size=%d x %d, %s runs, %d lane(s), expected runs %s, compaction %s, "
      "merges after loading fan-in <= %d, final merge <= %d runs (readahead %d..%d KiB)",
      o.write_buffer_size, o.max_write_buffer_number,
      RunCompressionName(o.compression), plan.lanes,
      plan.expected_runs == 0 ? std::string("unknown") : absl::StrCat(plan.expected_runs),
      compaction, plan.merge_down_fan_in, plan.max_final_runs, plan.min_readahead / 1024,
      plan.max_readahead / 1024);
}

}  // namespace rocksort::store
