#include "compaction_policy/compaction_policy.h"

#include "gtest/gtest.h"
#include "rocksdb/table.h"

namespace rocksort::compaction_policy {
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

TEST(CompactionPolicy, RunMemtableNeedsSerialInserts) {
  const SortPlan plan = MakePlan(Input(768 * kMiB, 1));
  EXPECT_STREQ(plan.options.memtable_factory->Name(), "RocksortRunMemTableFactory");
  EXPECT_FALSE(plan.options.allow_concurrent_memtable_write);
}

TEST(CompactionPolicy, MemtablesStayWithinThreeQuartersOfBudget) {
  for (uint64_t budget : {kMiB, 16 * kMiB, 768 * kMiB, 8192 * kMiB}) {
    const SortPlan plan = MakePlan(Input(budget, 2));
    EXPECT_LE(plan.options.write_buffer_size * plan.options.max_write_buffer_number,
              std::max<uint64_t>(budget * 3 / 4, 3 * 256 * 1024))
        << budget;
    EXPECT_LE(plan.batch_bytes, budget / 8 + 64 * 1024);
  }
}

TEST(CompactionPolicy, WithoutSizeHintNoBackgroundCompaction) {
  const SortPlan plan = MakePlan(Input(768 * kMiB, 2));
  EXPECT_FALSE(plan.background_compaction);
  EXPECT_TRUE(plan.options.disable_auto_compactions);
}

TEST(CompactionPolicy, WritesNeverStall) {
  for (uint64_t hint : {uint64_t{0}, 512 * 1024 * kMiB}) {
    const SortPlan plan = MakePlan(Input(64 * kMiB, 2, hint));
    EXPECT_GE(plan.options.level0_stop_writes_trigger, 1 << 20);
    EXPECT_GE(plan.options.level0_slowdown_writes_trigger, 1 << 20);
    EXPECT_EQ(plan.options.hard_pending_compaction_bytes_limit, 0u);
  }
}

TEST(CompactionPolicy, SizeHintGivesSqrtFanInUniversalCompaction) {
  // 64 MiB budget -> 16 MiB memtables; 16 GiB hint -> T = 1024 runs, f = 33.
  const SortPlan plan = MakePlan(Input(64 * kMiB, 1, 16384 * kMiB));
  EXPECT_TRUE(plan.background_compaction);
  EXPECT_FALSE(plan.options.disable_auto_compactions);
  EXPECT_EQ(plan.options.compaction_style, rocksdb::kCompactionStyleUniversal);
  const auto& u = plan.options.compaction_options_universal;
  EXPECT_EQ(u.min_merge_width, static_cast<unsigned>(std::min(33, plan.max_final_runs)));
  EXPECT_EQ(u.max_merge_width, 2 * u.min_merge_width);
  // A full merge of everything into one file must never trigger.
  EXPECT_GE(u.max_size_amplification_percent, 1u << 20);
}

TEST(CompactionPolicy, FinalReadaheadIsClampedToDiskProfile) {
  const SortPlan ssd = MakePlan(Input(768 * kMiB, 1));
  EXPECT_EQ(FinalReadahead(ssd, 1), ssd.max_readahead);
  EXPECT_EQ(FinalReadahead(ssd, 100000), ssd.min_readahead);
  const SortPlan hdd = MakePlan(Input(768 * kMiB, 1, 0, DiskKind::kHdd));
  EXPECT_GE(FinalReadahead(hdd, 1000), 2 * kMiB);
}

TEST(CompactionPolicy, FinalMergeFitsMergeBudget) {
  for (uint64_t budget : {16 * kMiB, 768 * kMiB}) {
    const SortPlan plan = MakePlan(Input(budget, 1));
    ASSERT_GE(plan.max_final_runs, 2);
    const auto* table = plan.options.table_factory->GetOptions<rocksdb::BlockBasedTableOptions>();
    ASSERT_NE(table, nullptr);
    const uint64_t per_run = FinalReadahead(plan, plan.max_final_runs) + 2 * table->block_size;
    if (plan.max_final_runs > 2) {
      EXPECT_LE(per_run * plan.max_final_runs, plan.merge_budget) << budget;
    }
  }
}

}  // namespace
}  // namespace rocksort::compaction_policy

namespace rocksort::compaction_policy {
namespace {

TEST(CompactionPolicy, TinyBudgetStillMergesManyRunsAtOnce) {
  // -m 1M: without a floor the fan-in would be 2 (binary merges).
  const SortPlan plan = MakePlan(Input(uint64_t{1} << 20, 1));
  EXPECT_GE(plan.max_final_runs, 16);
}

}  // namespace
}  // namespace rocksort::compaction_policy
