// File: store/merge_plan_internal.h  (internal to store/ and its tests)
// -----------------------------------------------------------------------------
// Which sorted runs the merges after loading combine. A lane holds its runs
// oldest first; RocksDB merges only runs that are adjacent in that order
// (level-0 files), so a merge takes a window of adjacent runs and leaves one
// run in its place. To get from n runs down to the `max_runs` the final
// merge reads, the merges must remove n - max_runs runs, and what they cost
// is the bytes they rewrite: the sum of the sizes of every window merged.
//
// While loading, PickBackgroundMerge merges the oldest fresh runs (flushed
// from memtables) first, so a lane is its merged runs followed by the fresh
// runs flushed since. (RocksDB's universal picker, used before, starts from
// the newest runs: when a lagging compaction thread found more fresh runs
// than one merge takes, it merged the newest and left the older ones behind
// for good, between merged runs; after loading a lane held 82 runs where
// the final merge reads 22.) After loading, the merges down to the final
// merge's limit choose their windows with PlanMergeDown: the set of disjoint
// windows of minimum total bytes that removes enough runs, so that the
// cheap fresh runs are merged and the large merged runs left alone.
//
// Pure functions; thread-safe.
#ifndef ROCKSORT_STORE_MERGE_PLAN_INTERNAL_H_
#define ROCKSORT_STORE_MERGE_PLAN_INTERNAL_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace rocksort::store {

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

// The background merge to run next in a lane while loading. `fresh` holds
// its runs oldest first, true for a run flushed from a memtable and false
// for one a merge wrote. The lane needs merging while its runs plus the
// `more_runs` still expected (< 0: unknown, as many as it takes) exceed
// `max_runs`, what the final merge reads from it. Then the merge takes the
// oldest `min_width` or more adjacent fresh runs, up to `max_width` (>=
// min_width >= 2) of them from the oldest: every fresh run is merged once,
// in the order it was flushed, and none is left behind between merged runs.
// When `more_runs` is known, `min_width` is not used: a merge takes at least
// the fresh runs to come divided by the slots of max_runs the merged runs
// leave (at least 2, at most max_width), so that the lane ends within
// max_runs when the estimate holds. Empty when the lane needs no merge or
// has no such window yet.
std::optional<MergeWindow> PickBackgroundMerge(const std::vector<bool>& fresh, int64_t more_runs,
                                               int max_runs, int min_width, int max_width);

}  // namespace rocksort::store

#endif  // ROCKSORT_STORE_MERGE_PLAN_INTERNAL_H_
