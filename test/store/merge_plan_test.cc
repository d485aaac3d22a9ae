#include "store/merge_plan_internal.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace rocksort::store {
namespace {

constexpr uint64_t kFresh = 7;    // A memtable's run, in MB.
constexpr uint64_t kMerged = 71;  // A background merge of ten of them.

// Checks that `plan` is a valid plan for the lane and returns the bytes it
// rewrites: windows in order, disjoint, 2..fan_in wide, leaving <= max_runs.
uint64_t CheckedCost(const std::vector<uint64_t>& runs, const std::vector<MergeWindow>& plan,
                     int max_runs, int fan_in) {
  uint64_t bytes = 0;
  int end = 0;
  int removed = 0;
  for (const MergeWindow& w : plan) {
    EXPECT_GE(w.start, end) << "windows overlap or are out of order";
    EXPECT_GE(w.width, 2);
    EXPECT_LE(w.width, fan_in);
    EXPECT_LE(w.start + w.width, static_cast<int>(runs.size()));
    for (int i = w.start; i < w.start + w.width; ++i) bytes += runs[i];
    end = w.start + w.width;
    removed += w.width - 1;
  }
  EXPECT_LE(static_cast<int>(runs.size()) - removed, max_runs);
  return bytes;
}

// The cheapest plan by trying every split of the lane into adjacent groups.
uint64_t BruteForceCost(const std::vector<uint64_t>& runs, int max_runs, int fan_in) {
  const int n = static_cast<int>(runs.size());
  uint64_t best = std::numeric_limits<uint64_t>::max();
  for (uint32_t cuts = 0; cuts < (1u << (n - 1)); ++cuts) {  // Bit i: a cut after run i.
    int groups = 0;
    bool fits = true;
    uint64_t bytes = 0;
    for (int start = 0; start < n;) {
      int end = start + 1;
      while (end < n && !(cuts >> (end - 1) & 1)) ++end;
      const int width = end - start;
      if (width > fan_in) fits = false;
      if (width > 1) {
        for (int i = start; i < end; ++i) bytes += runs[i];
      }
      ++groups;
      start = end;
    }
    if (fits && groups <= max_runs) best = std::min(best, bytes);
  }
  return best;
}

TEST(MergePlan, NothingToDoWithinTheLimit) {
  EXPECT_TRUE(PlanMergeDown({}, 4, 10).empty());
  EXPECT_TRUE(PlanMergeDown({5, 5, 5, 5}, 4, 10).empty());
}

// What background compaction left in a lane of the 2 GiB benchmark (-@ 2
// -m 32M, sizes in MB, oldest first): fresh runs it never reached, then
// merged runs with single fresh runs left between them. The cheapest
// full-width window, taken again and again, rewrites 855 MB to get to 22
// runs; the plan 677 MB.
TEST(MergePlan, LeavesMergedRunsAloneWhereItCan) {
  const std::vector<uint64_t> lane = {
      7,  7, 7,  7,  7, 7, 7,  7,  7, 7,  7,  7,  71, 71, 7,  71, 7, 7, 71, 7, 7, 7, 71,
      71, 7, 71, 71, 7, 7, 7,  71, 7, 71, 71, 7,  7,  71, 7,  71, 7, 7, 7,  7, 7, 7, 7,
      7,  7, 7,  7,  7, 7, 71, 7,  7, 71, 7,  71, 7,  7,  71, 7,  7, 7, 7,  7, 7, 7, 7};
  const std::vector<MergeWindow> plan = PlanMergeDown(lane, 22, 30);
  EXPECT_EQ(CheckedCost(lane, plan, 22, 30), 677u);
}

TEST(MergePlan, MergesOnlyFreshRunsWhenTheyAreEnough) {
  // Ten merged runs, then 20 fresh ones: 12 runs must go, and the fresh
  // runs alone can lose them.
  std::vector<uint64_t> lane(10, kMerged);
  lane.insert(lane.end(), 20, kFresh);
  const std::vector<MergeWindow> plan = PlanMergeDown(lane, 18, 16);
  EXPECT_EQ(CheckedCost(lane, plan, 18, 16), 13 * kFresh);
  for (const MergeWindow& w : plan) EXPECT_GE(w.start, 10);
}

TEST(MergePlan, MatchesExhaustiveSearch) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 2 + static_cast<int>(random() % 11);
    std::vector<uint64_t> lane(n);
    for (uint64_t& bytes : lane) bytes = random() % 3 == 0 ? 60 + random() % 30 : 1 + random() % 9;
    const int fan_in = 2 + static_cast<int>(random() % 5);
    const int max_runs = 1 + static_cast<int>(random() % n);
    const uint64_t best = BruteForceCost(lane, max_runs, fan_in);
    const std::vector<MergeWindow> plan = PlanMergeDown(lane, max_runs, fan_in);
    if (best == std::numeric_limits<uint64_t>::max()) {
      // One round cannot get there: one full-width window, then plan again.
      ASSERT_EQ(plan.size(), 1u);
      EXPECT_EQ(plan[0].width, std::min(fan_in, n - max_runs + 1));
      continue;
    }
    EXPECT_EQ(CheckedCost(lane, plan, max_runs, fan_in), best)
        << "trial " << trial << ": n " << n << ", max_runs " << max_runs << ", fan_in " << fan_in;
  }
}

// More runs than one round of merges can take down: the cheapest window of
// full width first (the oldest of equal ones); planning again after each
// merge gets there.
TEST(MergePlan, SeveralRoundsStartWithTheCheapestFullWindow) {
  std::vector<uint64_t> lane = {9, 9, 9, 9, 1, 1, 1, 9, 9, 9, 9, 9};
  std::vector<MergeWindow> plan = PlanMergeDown(lane, 2, 3);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0], (MergeWindow{4, 3}));
  int merges = 0;
  while (!(plan = PlanMergeDown(lane, 2, 3)).empty()) {
    const MergeWindow w = plan.front();
    uint64_t merged = 0;
    for (int i = w.start; i < w.start + w.width; ++i) merged += lane[i];
    lane.erase(lane.begin() + w.start, lane.begin() + w.start + w.width);
    lane.insert(lane.begin() + w.start, merged);
    ASSERT_LT(++merges, 20);
  }
  EXPECT_LE(lane.size(), 2u);
}

// The sizes the policy produces: a lane at -@ 2 -m 8M (195 runs to 15,
// fan-in 13) gets the whole plan at once; one far larger than any plan
// needs (2,000 runs to 400) gets the cheapest full-width window.
TEST(MergePlan, ExactPlanUpToTheSizesThePolicyProduces) {
  std::vector<uint64_t> lane(195, kFresh);
  for (size_t i = 0; i < lane.size(); i += 15) lane[i] = 14 * kFresh;
  const std::vector<MergeWindow> plan = PlanMergeDown(lane, 15, 13);
  EXPECT_GT(plan.size(), 1u);
  CheckedCost(lane, plan, 15, 13);

  const std::vector<uint64_t> huge(2000, kFresh);
  const std::vector<MergeWindow> one = PlanMergeDown(huge, 400, 10);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].width, 10);
}

// Lane layouts for PickBackgroundMerge: 'M' a merged run, 'f' a fresh one,
// oldest first.
std::vector<bool> Lane(const std::string& runs) {
  std::vector<bool> fresh;
  for (char c : runs) fresh.push_back(c == 'f');
  return fresh;
}

TEST(BackgroundMerge, TakesTheOldestFreshRunsFirst) {
  // 20 fresh runs behind two merged ones, F = 15: the oldest 15, so the 5
  // newest stay next to each other for the next merge.
  const auto w = PickBackgroundMerge(Lane("MM" + std::string(20, 'f')), -1, 8, 10, 15);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(*w, (MergeWindow{2, 15}));
  // Fewer than F: all of them.
  EXPECT_EQ(PickBackgroundMerge(Lane("M" + std::string(12, 'f')), -1, 8, 10, 15),
            (MergeWindow{1, 12}));
}

TEST(BackgroundMerge, WaitsForMinWidthFreshRuns) {
  EXPECT_FALSE(PickBackgroundMerge(Lane("MMMfffffffff"), -1, 2, 10, 15).has_value());
  EXPECT_EQ(PickBackgroundMerge(Lane("MMMffffffffff"), -1, 2, 10, 15), (MergeWindow{3, 10}));
}

TEST(BackgroundMerge, SkipsBlocksTooShortToMerge) {
  // Fresh runs left between merged runs (by an older picker) are too few for
  // a merge; the newer block is taken.
  EXPECT_EQ(PickBackgroundMerge(Lane("fffMffffMfff"), -1, 2, 4, 8), (MergeWindow{4, 4}));
  EXPECT_FALSE(PickBackgroundMerge(Lane("fffMfffMfff"), -1, 2, 4, 8).has_value());
}

TEST(BackgroundMerge, StopsWhenTheFinalMergeCanReadTheLane) {
  const std::vector<bool> lane = Lane("MM" + std::string(10, 'f'));  // 12 runs.
  // 12 runs now and 8 more expected, the final merge reads 20: no merge.
  EXPECT_FALSE(PickBackgroundMerge(lane, 8, 20, 10, 15).has_value());
  // One more expected run than that: merge.
  EXPECT_EQ(PickBackgroundMerge(lane, 9, 20, 10, 15), (MergeWindow{2, 10}));
  // The estimate was too low (nothing more expected), but the lane already
  // holds more than the final merge reads.
  EXPECT_EQ(PickBackgroundMerge(lane, 0, 11, 10, 15), (MergeWindow{2, 10}));
  // Unknown size: merge while runs arrive.
  EXPECT_EQ(PickBackgroundMerge(lane, -1, 20, 10, 15), (MergeWindow{2, 10}));
}

TEST(BackgroundMerge, SizesItsMergesSoTheLaneEndsWithinTheFinalMerge) {
  // Runs arrive one at a time, as many as expected; merges run as soon as
  // they are due. Whatever the count, the lane ends within what the final
  // merge reads, as long as max_runs merges of max_width can hold it: a
  // fixed width of ceil(runs / max_runs) leaves up to width - 1 fresh runs
  // behind its last merge (23 runs to 8 at width 3: 7 merged + 2 fresh).
  for (const auto& [max_runs, max_width, step] :
       {std::tuple{8, 15, 1}, std::tuple{15, 20, 1}, std::tuple{48, 76, 29}}) {
    for (int total = max_runs + 1; total <= max_runs * max_width; total += step) {
      SCOPED_TRACE(absl::StrCat(total, " runs to ", max_runs));
      std::vector<bool> lane;
      for (int flushed = 1; flushed <= total; ++flushed) {
        lane.push_back(true);
        while (auto w = PickBackgroundMerge(lane, total - flushed, max_runs, 2, max_width)) {
          ASSERT_LE(w->width, max_width);
          lane.erase(lane.begin() + w->start, lane.begin() + w->start + w->width);
          lane.insert(lane.begin() + w->start, false);
        }
      }
      ASSERT_LE(lane.size(), static_cast<size_t>(max_runs));
    }
  }
}

TEST(BackgroundMerge, MergesAtLeastWhatTheRunsToComeNeed) {
  // 5 merged runs of 8 slots, 4 fresh and 26 more to come: 30 fresh runs
  // into 3 slots take merges of 10, whatever min_width says.
  const std::vector<bool> lane = Lane("MMMMMffff");
  EXPECT_FALSE(PickBackgroundMerge(lane, 26, 8, 2, 15).has_value());
  EXPECT_FALSE(PickBackgroundMerge(Lane("MMMMM" + std::string(9, 'f')), 21, 8, 2, 15));
  EXPECT_EQ(PickBackgroundMerge(Lane("MMMMM" + std::string(10, 'f')), 20, 8, 2, 15),
            (MergeWindow{5, 10}));
  // Beyond what a merge holds: max_width.
  EXPECT_EQ(PickBackgroundMerge(Lane("MMMMMMM" + std::string(15, 'f')), 40, 8, 2, 15),
            (MergeWindow{7, 15}));
}

TEST(BackgroundMerge, MergingInFlushOrderLeavesOneFreshBlock) {
  // Simulate a lane: flushes arrive in bursts of 1..25 runs between picks;
  // after every merge the lane is its merged runs followed by its fresh
  // runs, so nothing is stranded.
  std::mt19937 rng(11);
  std::vector<bool> lane;
  for (int step = 0; step < 200; ++step) {
    const int burst = std::uniform_int_distribution<int>(1, 25)(rng);
    lane.insert(lane.end(), burst, true);
    while (auto w = PickBackgroundMerge(lane, -1, 8, 10, 15)) {
      lane.erase(lane.begin() + w->start, lane.begin() + w->start + w->width);
      lane.insert(lane.begin() + w->start, false);
    }
    const auto first_fresh = std::find(lane.begin(), lane.end(), true);
    EXPECT_EQ(std::find(first_fresh, lane.end(), false), lane.end());
    EXPECT_LT(lane.end() - first_fresh, 10);
  }
}

}  // namespace
}  // namespace rocksort::store
