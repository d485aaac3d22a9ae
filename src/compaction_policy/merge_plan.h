// File: compaction_policy/merge_plan.h
// -----------------------------------------------------------------------------
// Which sorted runs the merges after loading combine. A lane holds its runs
// oldest first; RocksDB merges only runs that are adjacent in that order
// (level-0 files), so a merge takes a window of adjacent runs and leaves one
// run in its place. To get from n runs down to the `max_runs` the final
// merge reads, the merges must remove n - max_runs runs, and what they cost
// is the bytes they rewrite: the sum of the sizes of every window merged.
//
// Background compaction leaves a lane as a mix: runs it merged (f times the
// size of a memtable's run) with fresh runs between them (RocksDB's
// universal picker starts from the newest runs, so the fresh runs that were
// not a whole merge's worth when it picked are left behind, one or two at a
// time). Taking the cheapest window of full width, one after the other,
// then rewrote merged runs that another choice of windows would have left
// alone. PlanMergeDown instead finds the set of disjoint windows of minimum
// total bytes that removes enough runs.
//
// Pure functions; thread-safe.
#ifndef ROCKSORT_COMPACTION_POLICY_MERGE_PLAN_H_
#define ROCKSORT_COMPACTION_POLICY_MERGE_PLAN_H_

#include <cstdint>
#include <vector>

namespace rocksort::compaction_policy {

// Runs [start, start + width) of a lane, oldest first.
struct MergeWindow {
  int start = 0;
  int width = 0;
  friend bool operator==(const MergeWindow& a, const MergeWindow& b) {
    return a.start == b.start && a.width == b.width;
  }
};

// The merges that take runs of these sizes (oldest first) to at most
// `max_runs` (>= 1) runs, each merging 2..`fan_in` adjacent runs (`fan_in`
// >= 2): disjoint windows, in order, that rewrite the fewest bytes; none when
// there are at most `max_runs` runs. When one round of disjoint windows
// cannot get there (more than max_runs x fan_in runs), or the exact plan
// would take more than 2^25 steps or 256 KiB to compute (a lane of 195 runs
// going to 15 needs 140 KiB), it returns the cheapest single window of full
// width, and the caller plans again after merging it.
std::vector<MergeWindow> PlanMergeDown(const std::vector<uint64_t>& run_bytes, int max_runs,
                                       int fan_in);

}  // namespace rocksort::compaction_policy

#endif  // ROCKSORT_COMPACTION_POLICY_MERGE_PLAN_H_
