#include "store/options_plan_internal.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/allocator.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "rocksdb/table.h"
#include "rocksdb/write_buffer_manager.h"
#include "test_util.h"

namespace rocksort::store {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

PolicyInput Input(uint64_t budget, int threads, uint64_t size_hint = 0,
                  DiskKind disk = DiskKind::kSsd) {
  PolicyInput in;
  in.memory_budget = budget;
  in.threads = threads;
  in.size_hint = size_hint;
  in.disk = disk;
  return in;
}

TEST(OptionsPlan, RunMemtableNeedsSerialInserts) {
  const SortPlan plan = MakePlan(Input(768 * kMiB, 1));
  EXPECT_STREQ(plan.options.memtable_factory->Name(), "RocksortRunMemTableFactory");
  EXPECT_FALSE(plan.options.allow_concurrent_memtable_write);
}

// Huge-page chunks where a memtable holds at least 8 of them (16 MiB), so
// that sealing a chunk at a time changes a run's size by a few percent at
// most; smaller memtables keep their entries in RocksDB's arena.
TEST(OptionsPlan, LargeMemtablesKeepTheirEntriesInHugePageChunks) {
  EXPECT_EQ(MakePlan(Input(16 * kMiB, 2)).memtable_chunks, nullptr);    // -@ 2 -m 8M
  EXPECT_EQ(MakePlan(Input(32 * kMiB, 2)).memtable_chunks, nullptr);    // 15.5 MiB memtables
  EXPECT_NE(MakePlan(Input(64 * kMiB, 2)).memtable_chunks, nullptr);    // -@ 2 -m 32M
  EXPECT_NE(MakePlan(Input(1536 * kMiB, 2)).memtable_chunks, nullptr);  // -@ 2 -m 768M
  const SortPlan plan = MakePlan(Input(1536 * kMiB, 2));
  EXPECT_GE(plan.options.write_buffer_size, 8 * HugeChunkPool::kChunkBytes);
}

TEST(OptionsPlan, MemtablesAndTheBatchStayWithinTheBudget) {
  for (uint64_t budget : {2 * kMiB, 16 * kMiB, 64 * kMiB, 768 * kMiB, 8192 * kMiB}) {
    SCOPED_TRACE(budget);
    const SortPlan plan = MakePlan(Input(budget, 2));
    // One memtable filling, one or two being written: half or a third of
    // the budget each, less the batch that spills into a lane's next
    // memtable. The write buffer manager, not the per-lane count, stops the
    // loader.
    EXPECT_GT(plan.options.max_write_buffer_number, 2);
    const uint64_t memtables = plan.memtables;
    EXPECT_LE(plan.options.write_buffer_size * memtables + plan.batch_bytes, budget);
    EXPECT_GE(plan.options.write_buffer_size * memtables + plan.batch_bytes,
              budget - memtables + 1);
    EXPECT_LE(plan.batch_bytes, budget / 16 + 64 * 1024);
    // The cap holds over all lanes together, not per column family.
    ASSERT_NE(plan.options.write_buffer_manager, nullptr);
    EXPECT_TRUE(plan.options.write_buffer_manager->enabled());
    EXPECT_EQ(plan.options.write_buffer_manager->buffer_size(), budget);
  }
}

// Three memtables only where each holds 256 MiB or more: two flush at once
// while the third fills. Smaller ones would make more, smaller runs, which
// the final merge reads with more seeks.
TEST(OptionsPlan, LargeBudgetsFlushTwoMemtablesAtOnce) {
  EXPECT_EQ(MakePlan(Input(64 * kMiB, 2)).memtables, 2u);     // -@ 2 -m 32M
  EXPECT_EQ(MakePlan(Input(768 * kMiB, 1)).memtables, 2u);    // -@ 1 -m 768M: 255 MiB thirds
  EXPECT_EQ(MakePlan(Input(1536 * kMiB, 2)).memtables, 3u);   // -@ 2 -m 768M
  const SortPlan plan = MakePlan(Input(1536 * kMiB, 2));
  EXPECT_GE(plan.options.write_buffer_size, 256 * kMiB);
  EXPECT_GE(plan.options.max_background_flushes, 2);
  // The count per lane lets a lane hold a memtable flushing and one filling.
  EXPECT_GE(plan.options.max_write_buffer_number, 2);
}

// RocksDB clips write_buffer_size to 64 GiB when it opens the DB: a budget
// past three such memtables gets three of 64 GiB, and the runs the plan
// expects are counted from that size, not from a third of the budget.
TEST(OptionsPlan, MemtablesStopAtTheLargestSizeRocksDbTakes) {
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  const SortPlan below = MakePlan(Input(96 * kGiB, 8, 1024 * kGiB));   // -@ 8 -m 12G
  EXPECT_EQ(below.memtables, 3u);
  EXPECT_LT(below.options.write_buffer_size, 64 * kGiB);
  const SortPlan plan = MakePlan(Input(256 * kGiB, 32, 1024 * kGiB));  // -@ 32 -m 8G
  EXPECT_EQ(plan.memtables, 3u);
  EXPECT_EQ(plan.options.write_buffer_size, 64 * kGiB);
  EXPECT_EQ(plan.expected_runs, 16u);
  EXPECT_LE(plan.options.write_buffer_size * plan.memtables + plan.batch_bytes, 256 * kGiB);
  // The clip the plan follows is RocksDB's.
  test_util::ScratchDir dir;
  rocksdb::Options options;
  options.create_if_missing = true;
  options.write_buffer_size = 100 * kGiB;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, dir.File("db"), &db).ok());
  EXPECT_EQ(db->GetOptions().write_buffer_size, 64 * kGiB);
  delete db;
}

TEST(OptionsPlan, RocksDbReadsNothingAheadItself) {
  for (DiskKind disk : {DiskKind::kSsd, DiskKind::kHdd}) {
    const SortPlan plan = MakePlan(Input(64 * kMiB, 2, 64 * 1024 * kMiB, disk));
    EXPECT_EQ(plan.options.compaction_readahead_size, 0u);
    const auto* table = plan.options.table_factory->GetOptions<rocksdb::BlockBasedTableOptions>();
    ASSERT_NE(table, nullptr);
    EXPECT_EQ(table->max_auto_readahead_size, 0u);
    EXPECT_TRUE(table->no_block_cache);
    EXPECT_EQ(plan.run_resident_bytes, 2 * table->block_size);
    // RocksDB's descriptors keep POSIX_FADV_RANDOM: the kernel reads ahead
    // only what the prefetch file system asks for.
    EXPECT_TRUE(plan.options.advise_random_on_open);
    EXPECT_EQ(plan.options.access_hint_on_compaction_start, rocksdb::Options::NONE);
  }
}

TEST(OptionsPlan, PageCacheBudgetGrowsWithTheBudgetUpTo256MiB) {
  EXPECT_EQ(MakePlan(Input(16 * kMiB, 2)).page_cache_budget, 160 * kMiB);
  EXPECT_EQ(MakePlan(Input(64 * kMiB, 2)).page_cache_budget, 256 * kMiB);
  EXPECT_EQ(MakePlan(Input(8192 * kMiB, 8)).page_cache_budget, 256 * kMiB);
}

TEST(OptionsPlan, FinalMergeFitsItsMemoryAndThePageCache) {
  for (uint64_t budget : {kMiB, 16 * kMiB, 64 * kMiB, 1536 * kMiB, 16384 * kMiB}) {
    for (DiskKind disk : {DiskKind::kSsd, DiskKind::kHdd}) {
      for (bool compaction : {true, false}) {
        SCOPED_TRACE(absl::StrCat(budget, disk == DiskKind::kHdd ? " hdd" : " ssd",
                                  compaction ? "" : " no compaction"));
        PolicyInput in = Input(budget, 2, 0, disk);
        in.allow_compaction = compaction;
        const SortPlan plan = MakePlan(in);
        const uint64_t k = static_cast<uint64_t>(plan.max_final_runs);
        EXPECT_LE(k * plan.run_resident_bytes,
                  std::max(plan.merge_budget, 2 * plan.run_resident_bytes));
        EXPECT_LE(k * (plan.min_chunk + plan.lead),
                  std::max<uint64_t>(plan.page_cache_budget, 2 * (plan.min_chunk + plan.lead)));
        EXPECT_EQ(plan.merge_budget, std::max(budget / 4 * 3, 4 * kMiB));
        // Whatever the number of runs, the chunks stay within the bounds and
        // the runs' chunks within the page cache budget.
        for (int runs : {1, 10, plan.max_final_runs}) {
          const Readahead r = FinalReadahead(plan, runs);
          EXPECT_GE(r.chunk, plan.min_chunk);
          EXPECT_LE(r.chunk, plan.max_chunk);
          EXPECT_GE(r.lead, plan.lead);
          EXPECT_LE(r.lead, std::max(plan.lead, 8 * r.chunk));
          if (runs == plan.max_final_runs) {
            EXPECT_LE(static_cast<uint64_t>(runs) * (r.chunk + r.lead),
                      std::max<uint64_t>(plan.page_cache_budget, 2 * (r.chunk + r.lead)));
          }
        }
        EXPECT_EQ(FinalReadahead(plan, 1).chunk, plan.max_chunk);
      }
    }
  }
}

TEST(OptionsPlan, AFinalMergeOfFewRunsReadsSeveralChunksAhead) {
  for (DiskKind disk : {DiskKind::kHdd, DiskKind::kSsd}) {
    const SortPlan plan = MakePlan(Input(768 * kMiB, 2, 0, disk));
    // Twelve runs (-m 768M on 7 GB): the page cache budget gives each run
    // its largest chunk and a lead of several of them, within the budget.
    const Readahead few = FinalReadahead(plan, 12);
    EXPECT_EQ(few.chunk, plan.max_chunk);
    EXPECT_GE(few.lead, 4 * few.chunk);
    EXPECT_LE(few.lead, 8 * few.chunk);
    EXPECT_LE(12 * (few.chunk + few.lead), plan.page_cache_budget);
    // Hundreds of runs share the budget in chunks: the plan's own lead.
    const Readahead many = FinalReadahead(plan, plan.max_final_runs);
    EXPECT_LE(many.lead, std::max(plan.lead, plan.page_cache_budget / plan.max_final_runs));
  }
}

TEST(OptionsPlan, RotatingDisksReadChunksOfAtLeastHalfAMebibyte) {
  const SortPlan hdd = MakePlan(Input(64 * kMiB, 2, 0, DiskKind::kHdd));
  EXPECT_EQ(hdd.min_chunk, 512 * 1024u);
  EXPECT_EQ(hdd.max_chunk, 2 * kMiB);
  const SortPlan ssd = MakePlan(Input(64 * kMiB, 2, 0, DiskKind::kSsd));
  EXPECT_EQ(ssd.min_chunk, 128 * 1024u);
  EXPECT_LT(ssd.max_chunk, hdd.max_chunk);
}

TEST(OptionsPlan, ChunksAreWholeDeviceRequests) {
  PolicyInput in = Input(64 * kMiB, 2, 0, DiskKind::kHdd);
  in.request_bytes = 1016 * 1024;
  const SortPlan plan = MakePlan(in);
  EXPECT_EQ(plan.max_chunk, 2 * in.request_bytes);
  for (int runs : {1, 3, 100, 300}) {
    const uint64_t chunk = FinalReadahead(plan, runs).chunk;
    EXPECT_TRUE(chunk <= in.request_bytes || chunk % in.request_bytes == 0)
        << runs << ": " << chunk;
  }
}

TEST(OptionsPlan, NoCompactionReadsEveryRunItsMemoryHolds) {
  for (DiskKind disk : {DiskKind::kSsd, DiskKind::kHdd}) {
    SCOPED_TRACE(static_cast<int>(disk));
    PolicyInput in = Input(64 * kMiB, 2, 512 * 1024 * kMiB, disk);
    const SortPlan on = MakePlan(in);
    in.allow_compaction = false;
    const SortPlan plan = MakePlan(in);
    EXPECT_EQ(plan.compaction, CompactionMode::kOff);
    EXPECT_TRUE(plan.options.disable_auto_compactions);
    // Chunks down to one block: the final merge reads as many runs as its
    // memory holds, not as many as the disk reads efficiently.
    EXPECT_EQ(plan.min_chunk, 64 * 1024u);
    EXPECT_EQ(static_cast<uint64_t>(plan.max_final_runs),
              plan.merge_budget / plan.run_resident_bytes);
    EXPECT_GE(plan.max_final_runs, on.max_final_runs);
  }
}

TEST(OptionsPlan, UnknownSizeStartsAdaptive) {
  const SortPlan plan = MakePlan(Input(768 * kMiB, 2));
  EXPECT_EQ(plan.compaction, CompactionMode::kAdaptive);
  EXPECT_TRUE(plan.options.disable_auto_compactions);  // rocksort picks the merges.
  EXPECT_EQ(plan.adaptive_trigger_runs, plan.max_final_runs);
}

TEST(OptionsPlan, DescriptionShowsBackgroundMergesOnlyWhenTheyRun) {
  PolicyInput in = Input(64 * kMiB, 2, 512 * 1024 * kMiB, DiskKind::kHdd);
  const std::string planned = DescribePlan(MakePlan(in));
  EXPECT_NE(planned.find("compaction planned ("), std::string::npos) << planned;
  EXPECT_NE(planned.find(" merge(s) at a time, fan-in "), std::string::npos) << planned;
  in.allow_compaction = false;
  const std::string off = DescribePlan(MakePlan(in));
  EXPECT_NE(off.find("compaction off, runs written "), std::string::npos) << off;
  EXPECT_NE(off.find(", merges after loading fan-in <= "), std::string::npos) << off;
  EXPECT_EQ(off.find("at a time"), std::string::npos) << off;
  in.allow_compaction = true;
  in.size_hint = 0;
  const std::string adaptive = DescribePlan(MakePlan(in));
  EXPECT_NE(adaptive.find("compaction adaptive ("), std::string::npos) << adaptive;
  EXPECT_NE(adaptive.find(", starts after "), std::string::npos) << adaptive;
}

TEST(OptionsPlan, FewExpectedRunsNeedNoCompaction) {
  // 1.5 GiB budget, 4 GiB of data: ~11 runs, far below what one merge reads.
  const SortPlan plan = MakePlan(Input(1536 * kMiB, 2, 4096 * kMiB));
  EXPECT_LE(plan.expected_runs, static_cast<uint64_t>(plan.max_final_runs));
  EXPECT_EQ(plan.compaction, CompactionMode::kOff);
  EXPECT_TRUE(plan.options.disable_auto_compactions);
}

// At -@ 2 -m 32M, 7 GB of records make ~220 runs of 32 MiB: fewer than
// the final merge reads, so nothing is merged before it and every record
// is written once.
TEST(OptionsPlan, ModerateMemoryWritesEveryRecordOnce) {
  const SortPlan plan = MakePlan(Input(64 * kMiB, 2, 7 * 1024 * kMiB, DiskKind::kHdd));
  EXPECT_EQ(plan.compaction, CompactionMode::kOff);
  EXPECT_LE(plan.expected_runs, static_cast<uint64_t>(plan.max_final_runs));
}

// Large runs that only the final merge reads skip the page cache (the
// kernel's copy into it cost the flushes CPU for pages nobody reads soon);
// runs merged while loading are read back from it, and so may be a pipe's;
// small runs stay buffered (read back in more requests when direct).
TEST(OptionsPlan, RunsOnlyTheFinalMergeReadsAreWrittenDirect) {
  const auto direct = [](const PolicyInput& in) {
    const SortPlan plan = MakePlan(in);
    EXPECT_FALSE(plan.options.use_direct_reads);
    EXPECT_EQ(plan.options.use_direct_io_for_flush_and_compaction,
              DescribePlan(plan).find("runs written direct") != std::string::npos);
    return plan.options.use_direct_io_for_flush_and_compaction;
  };
  constexpr uint64_t kSize = 7 * 1024 * kMiB;
  EXPECT_TRUE(direct(Input(1536 * kMiB, 2, kSize)));                  // -@ 2 -m 768M
  EXPECT_TRUE(direct(Input(1536 * kMiB, 2, kSize, DiskKind::kHdd)));
  EXPECT_TRUE(direct(Input(600 * kMiB, 2, kSize)));                   // 298 MiB memtables
  EXPECT_FALSE(direct(Input(64 * kMiB, 2, kSize, DiskKind::kHdd)));   // -@ 2 -m 32M: small runs
  EXPECT_FALSE(direct(Input(16 * kMiB, 2, kSize, DiskKind::kHdd)));   // -@ 2 -m 8M: planned
  EXPECT_FALSE(direct(Input(1536 * kMiB, 2)));                        // a pipe: adaptive
  PolicyInput no_compaction = Input(16 * kMiB, 2, kSize, DiskKind::kHdd);
  no_compaction.allow_compaction = false;  // More runs than the final merge reads.
  EXPECT_FALSE(direct(no_compaction));
}

// The same few large runs: the final merge reads the memtables loading
// leaves from memory; smaller memtables are flushed (kept, they took the
// page cache of the final merge's chunks in a memory cgroup).
TEST(OptionsPlan, TheFinalMergeReadsLargeMemtablesFromMemory) {
  constexpr uint64_t kSize = 7 * 1024 * kMiB;
  EXPECT_TRUE(MakePlan(Input(1536 * kMiB, 2, kSize)).final_merge_reads_memtables);
  EXPECT_TRUE(MakePlan(Input(1536 * kMiB, 2, kSize, DiskKind::kHdd)).final_merge_reads_memtables);
  EXPECT_FALSE(MakePlan(Input(64 * kMiB, 2, kSize)).final_merge_reads_memtables);
  EXPECT_FALSE(MakePlan(Input(16 * kMiB, 2, kSize, DiskKind::kHdd)).final_merge_reads_memtables);
  EXPECT_FALSE(MakePlan(Input(1536 * kMiB, 2)).final_merge_reads_memtables);  // A pipe.
  const SortPlan plan = MakePlan(Input(1536 * kMiB, 2, kSize));
  ASSERT_NE(plan.memtable_factory, nullptr);
  EXPECT_EQ(plan.options.memtable_factory, plan.memtable_factory);
}

// --run-compression auto (the default) leaves the compression of the few
// large runs only the final merge reads to the disk's measured speed
// (RawRunsPay): they start uncompressed, with LZ4 to fall back on; other
// runs, and any compression asked for, stay as planned.
TEST(OptionsPlan, AutoLeavesTheLargeDirectRunsToTheDisksSpeed) {
  constexpr uint64_t kSize = 7 * 1024 * kMiB;
  PolicyInput in = Input(1536 * kMiB, 2, kSize);  // -@ 2 -m 768M
  ASSERT_EQ(in.run_compression, RunCompression::kAuto);
  SortPlan plan = MakePlan(in);
  ASSERT_TRUE(plan.options.use_direct_io_for_flush_and_compaction);
  EXPECT_TRUE(plan.raw_runs_if_disk_keeps_up);
  EXPECT_EQ(plan.options.compression, rocksdb::kNoCompression);  // Until the store decides.
  EXPECT_EQ(plan.merged_compression, rocksdb::kLZ4Compression);
  EXPECT_NE(DescribePlan(plan).find(" uncompressed fresh runs (lz4 if the disk falls behind), "),
            std::string::npos);
  SortPlan short_of_room = plan;  // As the store leaves it without room for raw runs.
  short_of_room.options.compression = short_of_room.merged_compression;
  EXPECT_NE(DescribePlan(short_of_room).find(" lz4 fresh runs (uncompressed if the disk keeps up), "),
            std::string::npos);
  for (RunCompression asked :
       {RunCompression::kLz4, RunCompression::kZstd, RunCompression::kNone}) {
    in.run_compression = asked;
    plan = MakePlan(in);
    EXPECT_FALSE(plan.raw_runs_if_disk_keeps_up);
    EXPECT_EQ(plan.options.compression, plan.merged_compression);
    EXPECT_EQ(DescribePlan(plan).find("if the disk falls behind"), std::string::npos);
  }
  EXPECT_FALSE(MakePlan(Input(64 * kMiB, 2, kSize, DiskKind::kHdd)).raw_runs_if_disk_keeps_up);
  EXPECT_FALSE(MakePlan(Input(16 * kMiB, 2, kSize, DiskKind::kHdd)).raw_runs_if_disk_keeps_up);
  EXPECT_FALSE(MakePlan(Input(1536 * kMiB, 2)).raw_runs_if_disk_keeps_up);  // A pipe.
}

// Uncompressed runs where the disk writes runs 1.25x as fast as the load
// makes records and the filesystem holds the rest of the data raw, with a
// quarter to spare.
TEST(OptionsPlan, RawRunsPayWhereTheDiskKeepsUpAndHasRoom) {
  constexpr uint64_t kGB = 1000 * 1000 * 1000;
  RawRunsInput in;
  in.written_bytes = 300 * 1000 * 1000;  // At 600 MB/s
  in.write_seconds = 0.5;
  in.loaded_bytes = 2 * kGB;  // At 200 MB/s
  in.load_seconds = 10;
  in.size_hint = 7 * kGB;
  in.free_bytes = 50 * kGB;
  EXPECT_TRUE(RawRunsPay(in));
  RawRunsInput slow = in;
  slow.write_seconds = 1.21;  // 248 MB/s: under 1.25 x 200.
  EXPECT_FALSE(RawRunsPay(slow));
  slow.write_seconds = 1.19;  // 252 MB/s
  EXPECT_TRUE(RawRunsPay(slow));
  RawRunsInput full = in;
  full.free_bytes = 6 * kGB + kGB / 4 - 1;  // 5 GB to come, 6.25 needed.
  EXPECT_FALSE(RawRunsPay(full));
  full.free_bytes = 6 * kGB + kGB / 4;
  EXPECT_TRUE(RawRunsPay(full));
  RawRunsInput unmeasured = in;
  unmeasured.write_seconds = 0;
  EXPECT_FALSE(RawRunsPay(unmeasured));
  unmeasured = in;
  unmeasured.written_bytes = 0;
  EXPECT_FALSE(RawRunsPay(unmeasured));
  RawRunsInput past_the_estimate = in;  // More data than estimated: none to come.
  past_the_estimate.loaded_bytes = 8 * kGB;
  past_the_estimate.load_seconds = 40;
  past_the_estimate.free_bytes = 0;
  EXPECT_TRUE(RawRunsPay(past_the_estimate));
}

// Before the first run, the room for uncompressed runs is the whole
// estimate with a quarter to spare; later, what is still to come.
TEST(OptionsPlan, RoomForRawRunsIsWhatIsStillToComePlusAQuarter) {
  constexpr uint64_t kGB = 1000 * 1000 * 1000;
  EXPECT_TRUE(RoomForRawRuns(8 * kGB, 0, 10 * kGB));
  EXPECT_FALSE(RoomForRawRuns(8 * kGB, 0, 10 * kGB - 1));
  EXPECT_TRUE(RoomForRawRuns(8 * kGB, 4 * kGB, 5 * kGB));
  EXPECT_FALSE(RoomForRawRuns(8 * kGB, 4 * kGB, 5 * kGB - 1));
  EXPECT_TRUE(RoomForRawRuns(8 * kGB, 9 * kGB, 0));
  EXPECT_FALSE(RoomForRawRuns(8 * kGB, 0, 0));  // statvfs failed: no room known.
}

TEST(OptionsPlan, RunsAreLz4UnlessAnotherCompressionIsAsked) {
  // 4 GiB at a 64 MiB budget: ~130 runs, all read by the final merge as
  // they were flushed, so the fresh runs are compressed as asked.
  PolicyInput in = Input(64 * kMiB, 2, 4096 * kMiB);
  ASSERT_EQ(MakePlan(in).compaction, CompactionMode::kOff);
  EXPECT_EQ(MakePlan(in).options.compression, rocksdb::kLZ4Compression);
  EXPECT_EQ(MakePlan(in).merged_compression, rocksdb::kLZ4Compression);
  EXPECT_NE(DescribePlan(MakePlan(in)).find(" lz4 fresh runs, lz4 merged runs"), std::string::npos);
  in.run_compression = RunCompression::kSnappy;
  EXPECT_EQ(MakePlan(in).options.compression, rocksdb::kSnappyCompression);
  EXPECT_EQ(MakePlan(in).merged_compression, rocksdb::kSnappyCompression);
  EXPECT_NE(DescribePlan(MakePlan(in)).find(" snappy fresh runs"), std::string::npos);
  in.run_compression = RunCompression::kZstd;
  const SortPlan zstd = MakePlan(in);
  EXPECT_EQ(zstd.options.compression, rocksdb::kZSTD);
  EXPECT_EQ(zstd.options.compression_opts.level, 1);  // Not zstd's default 3.
  EXPECT_NE(DescribePlan(zstd).find(" zstd fresh runs"), std::string::npos);
  in.run_compression = RunCompression::kNone;
  EXPECT_EQ(MakePlan(in).options.compression, rocksdb::kNoCompression);
  EXPECT_EQ(MakePlan(in).merged_compression, rocksdb::kNoCompression);
  EXPECT_NE(DescribePlan(MakePlan(in)).find(" uncompressed fresh runs, uncompressed merged runs"),
            std::string::npos);
}

// Where every fresh run is merged while loading (the size is known and
// needs more runs than the final merge reads), a fresh run is read once,
// moments after its flush: it is written uncompressed, and only the merged
// runs carry the run compression.
TEST(OptionsPlan, FreshRunsMergedWhileLoadingAreUncompressed) {
  for (RunCompression asked : {RunCompression::kLz4, RunCompression::kZstd}) {
    PolicyInput in = Input(16 * kMiB, 2, 7 * 1024 * kMiB, DiskKind::kHdd);
    in.run_compression = asked;
    const SortPlan planned = MakePlan(in);
    ASSERT_EQ(planned.compaction, CompactionMode::kPlanned);
    EXPECT_EQ(planned.options.compression, rocksdb::kNoCompression);
    EXPECT_EQ(planned.merged_compression,
              asked == RunCompression::kLz4 ? rocksdb::kLZ4Compression : rocksdb::kZSTD);
    // Unknown size: merging may never start, so the fresh runs may be what
    // the final merge reads, and they stay compressed.
    in.size_hint = 0;
    const SortPlan adaptive = MakePlan(in);
    ASSERT_EQ(adaptive.compaction, CompactionMode::kAdaptive);
    EXPECT_EQ(adaptive.options.compression, adaptive.merged_compression);
    EXPECT_NE(adaptive.options.compression, rocksdb::kNoCompression);
  }
}

TEST(OptionsPlan, WritesNeverStall) {
  for (uint64_t hint : {uint64_t{0}, 512 * 1024 * kMiB}) {
    const SortPlan plan = MakePlan(Input(64 * kMiB, 2, hint));
    EXPECT_GE(plan.options.level0_stop_writes_trigger, 1 << 20);
    EXPECT_GE(plan.options.level0_slowdown_writes_trigger, 1 << 20);
    EXPECT_EQ(plan.options.hard_pending_compaction_bytes_limit, 0u);
  }
}

// -@ 2 -m 8M, 7 GB: ~900 runs, far more than the final merge reads. One
// round of merges while loading reaches what it reads, and the fresh runs
// a lane holds waiting stay within the page cache.
TEST(OptionsPlan, ManyExpectedRunsAreMergedInOneBackgroundRound) {
  const SortPlan plan = MakePlan(Input(16 * kMiB, 2, 7 * 1024 * kMiB, DiskKind::kHdd));
  EXPECT_EQ(plan.compaction, CompactionMode::kPlanned);
  const double ratio = static_cast<double>(plan.expected_runs) / plan.max_final_runs;
  EXPECT_GE(plan.merge_fan_in, static_cast<int>(std::ceil(ratio)));
  EXPECT_GE(plan.merge_max_fan_in, plan.merge_fan_in);
  EXPECT_LE(static_cast<uint64_t>(plan.merge_max_fan_in) * plan.lanes *
                plan.options.write_buffer_size / 2,
            plan.page_cache_budget);
  EXPECT_LE(plan.background_readahead.chunk, plan.max_chunk);
  EXPECT_GE(plan.background_readahead.chunk, plan.lead);
}

TEST(OptionsPlan, MergesFitTheirMemory) {
  for (uint64_t budget : {kMiB, 16 * kMiB, 64 * kMiB, 768 * kMiB}) {
    for (int threads : {1, 2, 8}) {
      SCOPED_TRACE(absl::StrCat(budget, " x", threads));
      const SortPlan plan = MakePlan(Input(budget, threads, 1000 * budget, DiskKind::kHdd));
      const uint64_t compaction_memory = std::max(budget / 4, 4 * kMiB);
      EXPECT_LE(static_cast<uint64_t>(plan.merge_max_fan_in) * plan.background_merges *
                    plan.run_resident_bytes,
                std::max(compaction_memory, 2 * plan.run_resident_bytes * plan.background_merges));
      EXPECT_LE(
          static_cast<uint64_t>(plan.merge_down_fan_in) * plan.lanes * plan.run_resident_bytes,
          std::max(plan.post_load_memory, 2 * plan.run_resident_bytes * plan.lanes));
      EXPECT_GE(plan.merge_down_readahead.chunk, plan.min_chunk);
      EXPECT_LE(plan.merge_down_readahead.chunk, plan.max_chunk);
    }
  }
}

// Without merges planned while loading (the size unknown, here).
TEST(OptionsPlan, OneLanePerThreadUpToFour) {
  for (DiskKind disk : {DiskKind::kSsd, DiskKind::kHdd}) {
    EXPECT_EQ(MakePlan(Input(64 * kMiB, 1, 0, disk)).lanes, 1);
    EXPECT_EQ(MakePlan(Input(64 * kMiB, 2, 0, disk)).lanes, 2);
    EXPECT_EQ(MakePlan(Input(64 * kMiB, 3, 0, disk)).lanes, 3);
    EXPECT_EQ(MakePlan(Input(64 * kMiB, 16, 0, disk)).lanes, 4);
  }
}

// Where every fresh run is merged while loading, a lane per merge at a
// time: each merge's lane may hold twice the fresh runs a merge of the
// planned width takes, so the loader goes on while a merge runs.
TEST(OptionsPlan, PlannedMergesGetALaneEach) {
  const uint64_t realistic = uint64_t{7187} << 20;  // -@ 2 -m 8M on the realistic input.
  const SortPlan two = MakePlan(Input(16 * kMiB, 2, realistic, DiskKind::kHdd));
  ASSERT_EQ(two.compaction, CompactionMode::kPlanned);
  EXPECT_EQ(two.lanes, two.background_merges);
  EXPECT_EQ(two.lanes, 1);
  EXPECT_GE(two.merge_max_fan_in, 2 * two.merge_fan_in);
  const SortPlan four = MakePlan(Input(32 * kMiB, 4, 4 * realistic, DiskKind::kHdd));
  ASSERT_EQ(four.compaction, CompactionMode::kPlanned);
  EXPECT_EQ(four.lanes, four.background_merges);
  EXPECT_EQ(four.lanes, 2);
  // Without merges planned, a lane per thread.
  EXPECT_EQ(MakePlan(Input(16 * kMiB, 2, 0, DiskKind::kHdd)).lanes, 2);
  EXPECT_EQ(MakePlan(Input(16 * kMiB, 2, 64 * kMiB, DiskKind::kHdd)).lanes, 2);
}

TEST(OptionsPlan, WholeRequests) {
  const uint64_t request = uint64_t{1016} << 10;
  EXPECT_EQ(WholeRequests(2 * kMiB, request, /*nearest=*/true), 2 * request);
  EXPECT_EQ(WholeRequests(2 * kMiB, request, /*nearest=*/false), 2 * request);
  EXPECT_EQ(WholeRequests(5 * request / 2 + 1, request, /*nearest=*/false), 2 * request);
  EXPECT_EQ(WholeRequests(5 * request / 2 + 1, request, /*nearest=*/true), 3 * request);
  EXPECT_EQ(WholeRequests(request + 1, request, /*nearest=*/true), request);
  EXPECT_EQ(WholeRequests(request / 2, request, /*nearest=*/true), request / 2);  // Fits one.
  EXPECT_EQ(WholeRequests(5 * kMiB, 0, /*nearest=*/true), 5 * kMiB);              // Unknown.
}

TEST(OptionsPlan, TinyBudgetStillMergesManyRunsAtOnce) {
  // -m 1M: without a floor the fan-in would be 2 (binary merges).
  const SortPlan plan = MakePlan(Input(uint64_t{1} << 20, 1));
  EXPECT_GE(plan.max_final_runs, 16);
}

TEST(OptionsPlan, OpenFileLimitCapsTheTableCacheAndEveryMerge) {
  // Unlimited: every table reader stays open.
  EXPECT_EQ(MakePlan(Input(768 * kMiB, 2, 64 * 768 * kMiB, DiskKind::kHdd)).options.max_open_files,
            -1);
  for (uint64_t limit : {uint64_t{64}, uint64_t{256}, uint64_t{1024}}) {
    for (DiskKind disk : {DiskKind::kSsd, DiskKind::kHdd}) {
      for (bool compaction : {true, false}) {
        // A large budget, whose merges would otherwise read thousands of runs.
        PolicyInput in = Input(8192 * kMiB, 4, 1000 * 8192 * kMiB, disk);
        in.open_files = limit;
        in.allow_compaction = compaction;
        const SortPlan plan = MakePlan(in);
        SCOPED_TRACE(absl::StrCat(limit, compaction ? " compaction" : " no compaction"));
        const rocksdb::Options& o = plan.options;
        ASSERT_GT(o.max_open_files, 0);
        EXPECT_LT(static_cast<uint64_t>(o.max_open_files), limit);
        // Whatever merges at once fits in the table cache: the final merge,
        // the lanes' merges after loading together, the background merges.
        EXPECT_LE(plan.max_final_runs, o.max_open_files / 2);
        EXPECT_LE(plan.merge_down_fan_in * plan.lanes,
                  std::max(o.max_open_files / 2, 2 * plan.lanes));
        EXPECT_LE(plan.merge_max_fan_in * plan.background_merges,
                  std::max(o.max_open_files / 2, 2 * plan.background_merges));
        EXPECT_GE(plan.max_final_runs, 2);
        EXPECT_GE(plan.merge_down_fan_in, 2);
      }
    }
  }
  // A generous limit changes nothing but the cache's size.
  PolicyInput in = Input(64 * kMiB, 2, 7000 * kMiB, DiskKind::kHdd);
  const SortPlan unlimited = MakePlan(in);
  in.open_files = 1 << 20;
  const SortPlan limited = MakePlan(in);
  EXPECT_EQ(limited.max_final_runs, unlimited.max_final_runs);
  EXPECT_EQ(limited.merge_down_fan_in, unlimited.merge_down_fan_in);
  EXPECT_EQ(limited.merge_fan_in, unlimited.merge_fan_in);
  EXPECT_EQ(limited.options.max_open_files, (1 << 20) - 64);
}

TEST(OptionsPlan, ScratchPeakFollowsTheRunCompression) {
  const uint64_t size = 4000 * kMiB;
  EXPECT_EQ(ExpectedScratchPeak(size, RunCompression::kLz4), size * 3 / 4);
  EXPECT_EQ(ExpectedScratchPeak(size, RunCompression::kZstd), size / 2);
  EXPECT_EQ(ExpectedScratchPeak(size, RunCompression::kNone), size * 3 / 2);
}

// Memtable arena blocks must come from the heap (common/allocator.h) so
// that the next memtable reuses a flushed one's blocks: mapped, every
// memtable faulted in all of its pages afresh (2.8 million page faults and
// ~36 CPU s on the 2 GiB benchmark, most of them in the loading thread).
TEST(AllocatorTest, MemtableArenaBlocksStayBelowTheHeapBlockLimitAtEveryBudget) {
  for (uint64_t budget = uint64_t{1} << 20; budget <= uint64_t{1} << 40; budget <<= 1) {
    PolicyInput input;
    input.memory_budget = budget;
    input.threads = 2;
    const SortPlan plan = MakePlan(input);
    EXPECT_LT(plan.options.arena_block_size, kHeapBlockLimit) << "budget " << budget;
  }
}

}  // namespace
}  // namespace rocksort::store
