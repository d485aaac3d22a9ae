#include "store/options_plan_internal.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/allocator.h"
#include "gtest/gtest.h"
#include "rocksdb/table.h"

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

TEST(OptionsPlan, MemtablesStayWithinThreeQuartersOfBudget) {
  for (uint64_t budget : {kMiB, 16 * kMiB, 768 * kMiB, 8192 * kMiB}) {
    const SortPlan plan = MakePlan(Input(budget, 2));
    EXPECT_LE(plan.options.write_buffer_size * plan.options.max_write_buffer_number,
              std::max<uint64_t>(budget * 3 / 4, 3 * 256 * 1024))
        << budget;
    EXPECT_LE(plan.batch_bytes, budget / 8 + 64 * 1024);
    // The cap holds over all lanes together, not per column family.
    ASSERT_NE(plan.options.write_buffer_manager, nullptr);
    EXPECT_TRUE(plan.options.write_buffer_manager->enabled());
    EXPECT_EQ(plan.options.write_buffer_manager->buffer_size(),
              plan.options.write_buffer_size * plan.options.max_write_buffer_number);
  }
}

TEST(OptionsPlan, UnknownSizeStartsAdaptive) {
  const SortPlan plan = MakePlan(Input(768 * kMiB, 2));
  EXPECT_EQ(plan.compaction, CompactionMode::kAdaptive);
  EXPECT_TRUE(plan.options.disable_auto_compactions);  // rocksort picks the merges.
  EXPECT_EQ(plan.adaptive_trigger_runs, plan.max_final_runs);
}

TEST(OptionsPlan, NoCompactionReadsAsManyRunsAsMemoryHolds) {
  for (DiskKind disk : {DiskKind::kSsd, DiskKind::kHdd}) {
    SCOPED_TRACE(static_cast<int>(disk));
    PolicyInput in = Input(64 * kMiB, 2, 512 * 1024 * kMiB, disk);
    const SortPlan on = MakePlan(in);
    in.allow_compaction = false;
    const SortPlan plan = MakePlan(in);
    EXPECT_EQ(plan.compaction, CompactionMode::kOff);
    EXPECT_TRUE(plan.options.disable_auto_compactions);
    // The same memory for the final merge, read down to one block of
    // readahead per run (plus the two blocks every run holds), not at the
    // disk's seek floor: many more runs are read without merging first.
    const uint64_t block = 64 * 1024;
    EXPECT_EQ(plan.merge_budget, on.merge_budget);
    EXPECT_EQ(plan.min_readahead, block);
    EXPECT_EQ(static_cast<uint64_t>(plan.max_final_runs), plan.merge_budget / (3 * block));
    EXPECT_GE(plan.max_final_runs, 2 * on.max_final_runs);
    EXPECT_EQ(FinalReadahead(plan, plan.max_final_runs), block);
    EXPECT_GT(FinalReadahead(plan, on.max_final_runs), block);
  }
}

TEST(OptionsPlan, DescriptionShowsBackgroundMergesOnlyWhenTheyRun) {
  PolicyInput in = Input(64 * kMiB, 2, 512 * 1024 * kMiB, DiskKind::kHdd);
  const std::string planned = DescribePlan(MakePlan(in));
  EXPECT_NE(planned.find("compaction planned ("), std::string::npos) << planned;
  EXPECT_NE(planned.find(" merge(s) at a time, fan-in "), std::string::npos) << planned;
  in.allow_compaction = false;
  const std::string off = DescribePlan(MakePlan(in));
  EXPECT_NE(off.find("compaction off, merges after loading fan-in <= "), std::string::npos) << off;
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

TEST(OptionsPlan, RunsAreLz4UnlessAnotherCompressionIsAsked) {
  PolicyInput in = Input(64 * kMiB, 2, 16384 * kMiB);
  EXPECT_EQ(MakePlan(in).options.compression, rocksdb::kLZ4Compression);
  EXPECT_NE(DescribePlan(MakePlan(in)).find(" lz4 runs"), std::string::npos);
  in.run_compression = RunCompression::kSnappy;
  EXPECT_EQ(MakePlan(in).options.compression, rocksdb::kSnappyCompression);
  EXPECT_NE(DescribePlan(MakePlan(in)).find(" snappy runs"), std::string::npos);
  in.run_compression = RunCompression::kZstd;
  const SortPlan zstd = MakePlan(in);
  EXPECT_EQ(zstd.options.compression, rocksdb::kZSTD);
  EXPECT_EQ(zstd.options.compression_opts.level, 1);  // Not zstd's default 3.
  EXPECT_NE(DescribePlan(zstd).find(" zstd runs"), std::string::npos);
}

TEST(OptionsPlan, WritesNeverStall) {
  for (uint64_t hint : {uint64_t{0}, 512 * 1024 * kMiB}) {
    const SortPlan plan = MakePlan(Input(64 * kMiB, 2, hint));
    EXPECT_GE(plan.options.level0_stop_writes_trigger, 1 << 20);
    EXPECT_GE(plan.options.level0_slowdown_writes_trigger, 1 << 20);
    EXPECT_EQ(plan.options.hard_pending_compaction_bytes_limit, 0u);
  }
}

TEST(OptionsPlan, ManyExpectedRunsAreMergedInOneBackgroundRound) {
  // 64 MiB budget, 16 GiB hint: T = 16 GiB / write_buffer_size runs.
  const SortPlan plan = MakePlan(Input(64 * kMiB, 1, 16384 * kMiB));
  const uint64_t run_bytes = plan.options.write_buffer_size;
  EXPECT_EQ(plan.expected_runs, (16384 * kMiB + run_bytes - 1) / run_bytes);
  EXPECT_EQ(plan.compaction, CompactionMode::kPlanned);
  // rocksort picks the merges (oldest fresh runs first); RocksDB's universal
  // picker, which starts from the newest, must never run.
  EXPECT_TRUE(plan.options.disable_auto_compactions);
  EXPECT_EQ(plan.options.compaction_style, rocksdb::kCompactionStyleUniversal);
  EXPECT_EQ(plan.options.num_levels, 1);
  // One round of f-way merges reaches the final fan-in: f * K >= T, unless
  // memory caps f.
  const int f = plan.merge_fan_in;
  EXPECT_GE(f, 2);
  // A merge may take every fresh run that piled up, up to what memory holds.
  EXPECT_GE(plan.merge_max_fan_in, f);
  const auto* table = plan.options.table_factory->GetOptions<rocksdb::BlockBasedTableOptions>();
  // Capped by memory: one more input at the smallest merge readahead would
  // not fit in the compaction memory.
  const uint64_t per_input = plan.min_background_readahead + 2 * table->block_size;
  const bool memory_capped = (f + 1) * per_input * plan.background_merges >
                             std::max<uint64_t>(16 * kMiB, 64 * kMiB / 4);
  EXPECT_TRUE(static_cast<uint64_t>(f) * plan.max_final_runs >= plan.expected_runs ||
              memory_capped);
}

TEST(OptionsPlan, MemoryCappedFanInLeavesOneRoundAfterLoading) {
  // -@ 2 -m 8M on hdd with a 16 GB hint (data:memory 1000): memory caps f,
  // and the merged runs of one background round are few enough for one
  // round of merges after loading to reach K.
  PolicyInput in = Input(16 * kMiB, 2, 16000 * kMiB, DiskKind::kHdd);
  in.request_bytes = 1016 * 1024;
  const SortPlan plan = MakePlan(in);
  ASSERT_EQ(plan.compaction, CompactionMode::kPlanned);
  const uint64_t f = plan.merge_fan_in;
  ASSERT_LT(f * plan.max_final_runs, plan.expected_runs);  // Capped.
  const uint64_t merged_runs_per_lane = (plan.expected_runs / plan.lanes + f - 1) / f;
  EXPECT_LE(merged_runs_per_lane,
            static_cast<uint64_t>(plan.max_final_runs_per_lane) * plan.merge_down_fan_in);
}

TEST(OptionsPlan, FinalReadaheadIsClampedToDiskProfile) {
  const SortPlan ssd = MakePlan(Input(768 * kMiB, 1));
  EXPECT_EQ(FinalReadahead(ssd, 1), ssd.max_readahead);
  EXPECT_EQ(FinalReadahead(ssd, 100000), ssd.min_readahead);
  const SortPlan hdd = MakePlan(Input(768 * kMiB, 1, 0, DiskKind::kHdd));
  EXPECT_GE(FinalReadahead(hdd, 1000), 1 * kMiB);
  EXPECT_EQ(FinalReadahead(hdd, 1000), hdd.min_readahead);
}

// Device request sizes the memory tests run with: unknown, virtio (254
// pages), SATA, an old 128 KiB limit, one below read_slack.
constexpr uint64_t kRequestSizes[] = {0, 1016 * 1024, 1280 * 1024, 128 * 1024, 60 * 1024};

TEST(OptionsPlan, FinalMergeFitsMergeBudget) {
  for (DiskKind disk : {DiskKind::kSsd, DiskKind::kHdd}) {
    for (uint64_t budget : {16 * kMiB, 768 * kMiB}) {
      for (uint64_t request : kRequestSizes) {
        PolicyInput in = Input(budget, 1, 0, disk);
        in.request_bytes = request;
        const SortPlan plan = MakePlan(in);
        SCOPED_TRACE(testing::Message() << "budget " << budget << " request " << request
                                        << " hdd " << (disk == DiskKind::kHdd));
        ASSERT_GE(plan.max_final_runs, 2);
        EXPECT_GE(plan.max_readahead, plan.min_readahead);
        const auto* table =
            plan.options.table_factory->GetOptions<rocksdb::BlockBasedTableOptions>();
        ASSERT_NE(table, nullptr);
        const uint64_t per_run = FinalReadahead(plan, plan.max_final_runs) + 2 * table->block_size;
        if (plan.max_final_runs > 2) {
          EXPECT_LE(per_run * plan.max_final_runs, plan.merge_budget);
        }
      }
    }
  }
}

TEST(OptionsPlan, SecondMergeAtATimeOnlyWhenOneRoundCannotReachK) {
  const auto merges = [](uint64_t budget, int threads, uint64_t size_hint) {
    PolicyInput in = Input(budget, threads, size_hint, DiskKind::kHdd);
    in.request_bytes = 1016 * 1024;
    const SortPlan plan = MakePlan(in);
    EXPECT_EQ(plan.compaction, size_hint == 0 ? CompactionMode::kAdaptive
                                              : CompactionMode::kPlanned);
    return plan.background_merges;
  };
  // The benchmark at -@ 2: one round reaches K at -m 8M (T / K = 56, F =
  // 64) and -m 32M (T / K = 9.3); at -m 8M 16 GB need two.
  EXPECT_EQ(merges(16 * kMiB, 2, 7000 * kMiB), 1);
  EXPECT_EQ(merges(64 * kMiB, 2, 7000 * kMiB), 1);
  EXPECT_EQ(merges(16 * kMiB, 2, 16000 * kMiB), 2);
  // One core: a second merge would only compete with the loader.
  EXPECT_EQ(merges(8 * kMiB, 1, 7000 * kMiB), 1);
  // An unknown size is no evidence of a second round.
  EXPECT_EQ(merges(16 * kMiB, 2, 0), 1);
  // From -@ 4 on there are two or more anyway.
  EXPECT_EQ(merges(32 * kMiB, 4, 7000 * kMiB), 2);
}

TEST(OptionsPlan, BackgroundMergesReadSmallChunksOnlyForFanIn) {
  const auto plan = [](uint64_t budget, uint64_t size_hint) {
    PolicyInput in = Input(budget, 2, size_hint, DiskKind::kHdd);
    in.request_bytes = 1016 * 1024;
    return MakePlan(in);
  };
  // -m 32M on the benchmark: one merge of 948 KiB reads takes T / K runs.
  const SortPlan wide = plan(64 * kMiB, 7000 * kMiB);
  EXPECT_EQ(wide.min_background_readahead, wide.min_merge_readahead);
  EXPECT_GE(wide.merge_max_fan_in, wide.merge_fan_in);
  // -m 8M: it could not (F = 15 for T / K = 56); 128 KiB reads let one
  // merge take them all.
  const SortPlan narrow = plan(16 * kMiB, 7000 * kMiB);
  EXPECT_EQ(narrow.min_background_readahead, 128 * 1024);
  EXPECT_LT(narrow.min_background_readahead, narrow.min_merge_readahead);
  EXPECT_EQ(narrow.background_merges, 1);
  EXPECT_GE(static_cast<uint64_t>(narrow.merge_fan_in) * narrow.max_final_runs,
            narrow.expected_runs);
  EXPECT_GE(narrow.options.compaction_readahead_size, 128 * 1024);
  EXPECT_LT(narrow.options.compaction_readahead_size, narrow.min_merge_readahead);
  // The merges after loading read runs back from the disk: disk-sized reads.
  EXPECT_GE(narrow.merge_down_readahead, narrow.min_merge_readahead);
  // An unknown size (a pipe) keeps disk-sized reads: its ratio is a guess.
  const SortPlan pipe = plan(16 * kMiB, 0);
  EXPECT_EQ(pipe.min_background_readahead, pipe.min_merge_readahead);
}

TEST(OptionsPlan, MergesFitTheirMemory) {
  for (DiskKind disk : {DiskKind::kSsd, DiskKind::kHdd}) {
    for (uint64_t budget : {16 * kMiB, 64 * kMiB, 1024 * kMiB}) {
      for (int threads : {1, 2, 8}) {
        for (uint64_t request : kRequestSizes) {
          PolicyInput in = Input(budget, threads, 1000 * budget, disk);
          in.request_bytes = request;
          const SortPlan plan = MakePlan(in);
          const auto* table =
              plan.options.table_factory->GetOptions<rocksdb::BlockBasedTableOptions>();
          ASSERT_NE(table, nullptr);
          const uint64_t blocks = 2 * table->block_size;
          SCOPED_TRACE(testing::Message() << "budget " << budget << " threads " << threads
                                          << " request " << request);
          // Background compactions, all running at once, within max(B/4, 16 MiB).
          EXPECT_GE(plan.options.compaction_readahead_size, plan.min_background_readahead);
          EXPECT_LE(plan.merge_max_fan_in * (plan.options.compaction_readahead_size + blocks) *
                        plan.background_merges,
                    std::max(budget / 4, 16 * kMiB));
          // The merges after loading, one per lane at once, within the memory
          // loading used.
          EXPECT_GE(plan.merge_down_readahead, plan.min_merge_readahead);
          EXPECT_LE(plan.lanes * plan.merge_down_fan_in * (plan.merge_down_readahead + blocks),
                    plan.post_load_memory);
          EXPECT_LE(plan.post_load_memory, budget * 3 / 4 + std::max(budget / 4, 16 * kMiB));
          EXPECT_GE(plan.merge_down_fan_in, 2);
        }
      }
    }
  }
}

TEST(OptionsPlan, RecordsAreRewrittenAboutTwiceUpToRatio1000) {
  // Data 1000x the budget; the bound is "about twice". The plan's
  // two stages: one background round of f-way merges (T runs to T / f), then
  // merges after loading, merge_down_fan_in wide, from T / f to K:
  // log(T / f / K) / log(merge_down_fan_in) more rounds. (Counting every
  // round at f, 2.55 rounds at -@ 2 -m 8M on hdd since two merges at a time
  // halve f there; measured at data:memory 420: 1.87 rewrites.)
  for (DiskKind disk : {DiskKind::kSsd, DiskKind::kHdd}) {
    for (uint64_t budget : {16 * kMiB, 64 * kMiB, 1024 * kMiB}) {
      const SortPlan plan = MakePlan(Input(budget, 2, 1000 * budget, disk));
      ASSERT_EQ(plan.compaction, CompactionMode::kPlanned);
      const double after_background =
          static_cast<double>(plan.expected_runs) / plan.merge_fan_in / plan.max_final_runs;
      const double rounds = 1.0 + std::max(0.0, std::log(after_background) /
                                                    std::log(static_cast<double>(
                                                        plan.merge_down_fan_in)));
      EXPECT_LE(rounds, 2.5) << "budget " << budget << " hdd " << (disk == DiskKind::kHdd);
    }
  }
}

TEST(OptionsPlan, OneLanePerThreadUpToFour) {
  for (DiskKind disk : {DiskKind::kSsd, DiskKind::kHdd}) {
    EXPECT_EQ(MakePlan(Input(64 * kMiB, 1, 0, disk)).lanes, 1);
    EXPECT_EQ(MakePlan(Input(64 * kMiB, 2, 0, disk)).lanes, 2);
    EXPECT_EQ(MakePlan(Input(64 * kMiB, 3, 0, disk)).lanes, 3);
    EXPECT_EQ(MakePlan(Input(64 * kMiB, 16, 0, disk)).lanes, 4);
  }
}

TEST(OptionsPlan, FinalMergeReadsAtLeastEightRunsFromEveryLane) {
  for (DiskKind disk : {DiskKind::kSsd, DiskKind::kHdd}) {
    for (uint64_t budget : {kMiB, 16 * kMiB, 1024 * kMiB}) {
      for (int threads : {1, 2, 4, 64}) {
        const SortPlan plan = MakePlan(Input(budget, threads, 1000 * budget, disk));
        SCOPED_TRACE(testing::Message() << "budget " << budget << " threads " << threads);
        ASSERT_GE(plan.lanes, 1);
        EXPECT_GE(plan.max_final_runs_per_lane, 8);
        EXPECT_LE(plan.lanes * plan.max_final_runs_per_lane, plan.max_final_runs);
      }
    }
  }
}

// True when reads of `readahead` plus the block RocksDB adds (up to
// plan.read_slack) fill whole requests, or fit in one.
bool FillsWholeRequests(const SortPlan& plan, uint64_t readahead) {
  const uint64_t reads = readahead + plan.read_slack;
  return reads <= plan.request_bytes || reads % plan.request_bytes == 0;
}

TEST(OptionsPlan, ReadsFillWholeDeviceRequests) {
  // A virtio disk with 254 segments takes 1016 KiB per buffered read; a
  // SATA disk typically 1280 KiB.
  for (uint64_t request :
       {uint64_t{1016} << 10, uint64_t{1280} << 10, uint64_t{512} << 10, uint64_t{128} << 10}) {
    for (DiskKind disk : {DiskKind::kSsd, DiskKind::kHdd}) {
      for (uint64_t budget : {16 * kMiB, 64 * kMiB, 1024 * kMiB}) {
        PolicyInput in = Input(budget, 2, 1000 * budget, disk);
        in.request_bytes = request;
        const SortPlan plan = MakePlan(in);
        SCOPED_TRACE(testing::Message() << "request " << request << " budget " << budget
                                        << " hdd " << (disk == DiskKind::kHdd));
        ASSERT_EQ(plan.request_bytes, request);
        EXPECT_TRUE(FillsWholeRequests(plan, plan.min_readahead));
        EXPECT_TRUE(FillsWholeRequests(plan, plan.min_merge_readahead));
        EXPECT_TRUE(FillsWholeRequests(plan, plan.options.compaction_readahead_size));
        EXPECT_TRUE(FillsWholeRequests(plan, plan.merge_down_readahead));
        for (int runs : {1, 3, plan.max_final_runs, 1000}) {
          EXPECT_TRUE(FillsWholeRequests(plan, FinalReadahead(plan, runs))) << runs;
          EXPECT_GE(FinalReadahead(plan, runs), plan.min_readahead) << runs;
        }
      }
    }
  }
}

TEST(OptionsPlan, WholeRequests) {
  const uint64_t request = uint64_t{1016} << 10;
  EXPECT_EQ(WholeRequests(2 * kMiB, request, /*nearest=*/true), 2 * request);
  EXPECT_EQ(WholeRequests(2 * kMiB, request, /*nearest=*/false), 2 * request);
  EXPECT_EQ(WholeRequests(5 * request / 2 + 1, request, /*nearest=*/false), 2 * request);
  EXPECT_EQ(WholeRequests(5 * request / 2 + 1, request, /*nearest=*/true), 3 * request);
  EXPECT_EQ(WholeRequests(request + 1, request, /*nearest=*/true), request);
  EXPECT_EQ(WholeRequests(request / 2, request, /*nearest=*/true), request / 2);  // Fits one.
  EXPECT_EQ(WholeRequests(5 * kMiB, 0, /*nearest=*/true), 5 * kMiB);             // Unknown.
}

TEST(OptionsPlan, KernelReadaheadStaysOffForTableFiles) {
  const SortPlan plan = MakePlan(Input(64 * kMiB, 2, 64 * 1024 * kMiB, DiskKind::kHdd));
  EXPECT_TRUE(plan.options.advise_random_on_open);
  EXPECT_EQ(plan.options.access_hint_on_compaction_start, rocksdb::Options::NONE);
}

TEST(OptionsPlan, RequestsNoLargerThanTheSlackLeaveReadaheadAsIs) {
  PolicyInput in = Input(64 * kMiB, 2, 64 * 1024 * kMiB, DiskKind::kHdd);
  const SortPlan unknown = MakePlan(in);
  in.request_bytes = 60 * 1024;  // Below read_slack: no whole number would fit.
  const SortPlan tiny = MakePlan(in);
  EXPECT_LE(in.request_bytes, tiny.read_slack);
  EXPECT_EQ(tiny.min_readahead, unknown.min_readahead);
  EXPECT_EQ(tiny.max_readahead, unknown.max_readahead);
  EXPECT_EQ(FinalReadahead(tiny, 5), FinalReadahead(unknown, 5));
}

TEST(OptionsPlan, HddFloorsRoundToTheNearestWholeRequest) {
  // -@ 3: the final merge's floor is the 2 MiB seek floor (below).
  PolicyInput in = Input(64 * kMiB, 3, 64 * 1024 * kMiB, DiskKind::kHdd);
  in.request_bytes = uint64_t{1016} << 10;
  SortPlan plan = MakePlan(in);
  // 2 MiB + slack is just over two requests: two, minus the slack.
  EXPECT_EQ(plan.min_readahead + plan.read_slack, 2 * in.request_bytes);
  EXPECT_EQ(plan.min_merge_readahead + plan.read_slack, in.request_bytes);
  in.request_bytes = uint64_t{1280} << 10;
  plan = MakePlan(in);
  EXPECT_EQ(plan.min_readahead + plan.read_slack, 2 * in.request_bytes);
  EXPECT_EQ(plan.min_merge_readahead, 1 * kMiB);  // Its reads fit one request as they are.
  // Unknown request size: the profile's values as they are.
  in.request_bytes = 0;
  plan = MakePlan(in);
  EXPECT_EQ(plan.min_readahead, 2 * kMiB);
  EXPECT_EQ(plan.min_merge_readahead, 1 * kMiB);
}

TEST(OptionsPlan, HddReadsFewerLargerChunks) {
  const SortPlan ssd = MakePlan(Input(64 * kMiB, 2, 64 * 1024 * kMiB, DiskKind::kSsd));
  const SortPlan hdd = MakePlan(Input(64 * kMiB, 2, 64 * 1024 * kMiB, DiskKind::kHdd));
  EXPECT_GE(hdd.min_readahead, 1 * kMiB);
  EXPECT_GE(hdd.min_merge_readahead, 1 * kMiB);
  EXPECT_GT(hdd.min_readahead, ssd.min_readahead);
  EXPECT_LT(hdd.max_final_runs, ssd.max_final_runs);
  EXPECT_LE(hdd.merge_down_fan_in, ssd.merge_down_fan_in);
}

}  // namespace
}  // namespace rocksort::store

namespace rocksort::store {
namespace {

// The final merge may use three quarters of B (the memtables are gone by
// then; the rest is the emit phase's), once that is above the floors. With
// half, -@ 2 -m 32M on the benchmark disk read 16 runs at the end and the
// merges after loading rewrote most background-merged runs (write
// amplification 2.53 instead of 2.35).
TEST(OptionsPlan, FinalMergeGetsThreeQuartersOfTheBudget) {
  PolicyInput in = Input(64 * kMiB, 2, 7 * 1024 * kMiB, DiskKind::kHdd);
  in.request_bytes = 1016 * 1024;  // The benchmark's virtio disk.
  const SortPlan plan = MakePlan(in);
  EXPECT_EQ(plan.merge_budget, 48 * kMiB);
  EXPECT_EQ(plan.max_final_runs, 45);  // 48 MiB / (948 KiB + 2 x 64 KiB).
  for (uint64_t budget : {256 * kMiB, 1024 * kMiB, 8192 * kMiB}) {
    for (int threads : {2, 8}) {
      const SortPlan p = MakePlan(Input(budget, threads, 100 * budget, DiskKind::kHdd));
      EXPECT_LE(p.merge_budget, budget / 4 * 3) << budget << " " << threads;
    }
  }
}

// On a disk, the final merge reads in chunks that deliver 1.5x what the
// emit phase's threads consume (26 MB/s each) at 8 ms per seek and 180 MB/s,
// between the 1 MiB of intermediate merges and the 2 MiB seek floor: 1 MiB
// reads at -@ 1-2, which double the runs the final merge reads in the
// floor's memory.
TEST(OptionsPlan, FinalReadsOnADiskKeepUpWithTheEmitter) {
  const auto delivered = [](uint64_t readahead) {
    return static_cast<double>(readahead) / (0.008 + static_cast<double>(readahead) / 180e6);
  };
  uint64_t previous = 0;
  for (int threads = 1; threads <= 64; ++threads) {
    const SortPlan plan = MakePlan(Input(64 * kMiB, threads, 7 * 1024 * kMiB, DiskKind::kHdd));
    SCOPED_TRACE(threads);
    EXPECT_GE(plan.min_readahead, plan.min_merge_readahead);
    EXPECT_LE(plan.min_readahead, 2 * kMiB);
    EXPECT_GE(plan.min_readahead, previous);  // More threads consume faster.
    previous = plan.min_readahead;
    if (plan.min_readahead < 2 * kMiB) {
      EXPECT_GE(delivered(plan.min_readahead), 1.5 * 26e6 * threads * 0.999);
    }
  }
  EXPECT_EQ(MakePlan(Input(64 * kMiB, 1, 0, DiskKind::kHdd)).min_readahead, 1 * kMiB);
  EXPECT_LT(MakePlan(Input(64 * kMiB, 2, 0, DiskKind::kHdd)).min_readahead, 2 * kMiB);
  EXPECT_EQ(MakePlan(Input(64 * kMiB, 3, 0, DiskKind::kHdd)).min_readahead, 2 * kMiB);
  // SSDs: 256 KiB delivers far more than any emitter consumes.
  EXPECT_EQ(MakePlan(Input(64 * kMiB, 64, 0, DiskKind::kSsd)).min_readahead, 256 * 1024);

  // -@ 2 -m 8M on the benchmark's disk: the floor's memory, 8 runs per lane
  // at 1964 KiB + 2 blocks, reads 31 runs at 948 KiB + 2 blocks.
  PolicyInput in = Input(16 * kMiB, 2, 7 * 1024 * kMiB, DiskKind::kHdd);
  in.request_bytes = 1016 * 1024;
  const SortPlan plan = MakePlan(in);
  EXPECT_EQ(plan.min_readahead, 948 * 1024);
  EXPECT_EQ(plan.merge_budget, 2 * 8 * (1964 + 128) * 1024);
  EXPECT_EQ(plan.max_final_runs, 31);
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
