// File: store/merge_plan.cc
#include "store/merge_plan_internal.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace rocksort::store {
namespace {

// The exact plan takes O(runs x runs to remove x fan_in) steps and keeps 4
// bytes per (runs, runs to remove) pair; above these limits the cheapest
// full-width window is good enough (such lanes need several rounds of
// merges anyway, or they have little to remove). 2^16 pairs is 256 KiB: a
// lane of 195 runs going to 15 (-@ 2 -m 8M) needs 35,000.
constexpr uint64_t kMaxPlanSteps = uint64_t{1} << 25;
constexpr uint64_t kMaxPlanCells = uint64_t{1} << 16;

// The cheapest window of width min(fan_in, n - max_runs + 1), the oldest on
// ties.
MergeWindow CheapestFullWindow(const std::vector<uint64_t>& prefix, int max_runs, int fan_in) {
  const int n = static_cast<int>(prefix.size()) - 1;
  const int width = std::min(fan_in, n - max_runs + 1);
  MergeWindow best{0, width};
  uint64_t best_bytes = std::numeric_limits<uint64_t>::max();
  for (int start = 0; start + width <= n; ++start) {
    const uint64_t bytes = prefix[start + width] - prefix[start];
    if (bytes < best_bytes) best_bytes = bytes, best.start = start;
  }
  return best;
}

}  // namespace

std::vector<MergeWindow> PlanMergeDown(const std::vector<uint64_t>& run_bytes, int max_runs,
                                       int fan_in) {
  max_runs = std::max(max_runs, 1);
  fan_in = std::max(fan_in, 2);
  const int n = static_cast<int>(run_bytes.size());
  if (n <= max_runs) return {};
  std::vector<uint64_t> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + run_bytes[i];

  const int to_remove = n - max_runs;
  const uint64_t columns = static_cast<uint64_t>(to_remove) + 1;
  if (static_cast<uint64_t>(n) > static_cast<uint64_t>(max_runs) * fan_in ||
      (n + 1) * columns > kMaxPlanCells || n * columns * fan_in > kMaxPlanSteps) {
    return {CheapestFullWindow(prefix, max_runs, fan_in)};
  }

  // cost(i, r): the fewest bytes rewritten by windows within the first i
  // runs that remove r of them (r counts up to to_remove: removing more is
  // never needed, so a window that overshoots counts as reaching it). Rows
  // are filled forward from row i into rows i + 1 .. i + fan_in, so fan_in
  // + 1 rows are live at once. step(i, r) records how the best way to (i,
  // r) got there: the last window's width (1: run i - 1 is not merged) and
  // the r before it.
  struct Step {
    uint16_t width;
    uint16_t r_before;
  };
  constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();
  const int rows = fan_in + 1;
  std::vector<uint64_t> cost(static_cast<size_t>(rows) * columns, kNone);
  std::vector<Step> step(static_cast<size_t>(n + 1) * columns, Step{0, 0});
  auto cost_at = [&](int i, int r) -> uint64_t& {
    return cost[static_cast<size_t>(i % rows) * columns + r];
  };
  auto step_at = [&](int i, int r) -> Step& { return step[static_cast<size_t>(i) * columns + r]; };
  auto relax = [&](int i, int r, uint64_t c, int w, int r_before) {
    if (c < cost_at(i, r)) {
      cost_at(i, r) = c;
      step_at(i, r) = Step{static_cast<uint16_t>(w), static_cast<uint16_t>(r_before)};
    }
  };
  cost_at(0, 0) = 0;
  for (int i = 0; i < n; ++i) {
    for (int r = 0; r <= to_remove; ++r) {
      const uint64_t c = cost_at(i, r);
      if (c == kNone) continue;
      cost_at(i, r) = kNone;  // The row is reused for i + rows.
      relax(i + 1, r, c, 1, r);
      if (r == to_remove) continue;  // Enough removed: the rest stays as it is.
      for (int w = 2; w <= std::min(fan_in, n - i); ++w) {
        relax(i + w, std::min(to_remove, r + w - 1), c + (prefix[i + w] - prefix[i]), w, r);
      }
    }
  }

  std::vector<MergeWindow> plan;
  for (int i = n, r = to_remove; i > 0;) {
    const Step s = step_at(i, r);
    if (s.width > 1) plan.push_back(MergeWindow{i - s.width, s.width});
    i -= s.width;
    r = s.r_before;
  }
  std::reverse(plan.begin(), plan.end());
  return plan;
}

std::optional<MergeWindow> PickBackgroundMerge(const std::vector<bool>& fresh, int64_t more_runs,
                                               int max_runs, int min_width, int max_width) {
  const int64_t runs = static_cast<int64_t>(fresh.size());
  if (more_runs >= 0 && runs + more_runs <= max_runs) return std::nullopt;
  const int n = static_cast<int>(fresh.size());
  if (more_runs >= 0) {
    // The fresh runs to come, merged w at a time into the slots the merged
    // runs leave, end within max_runs when w >= fresh / slots: the narrowest
    // such w, so the last ones are merged too (no lane is left for the
    // merges after loading) and an estimate that grows raises it.
    const int64_t merged = std::count(fresh.begin(), fresh.end(), false);
    const int64_t fresh_to_come = runs - merged + more_runs;
    const int64_t slots = max_runs - merged;
    const int64_t needed = slots <= 0 ? max_width : (fresh_to_come + slots - 1) / slots;
    min_width = static_cast<int>(std::clamp<int64_t>(needed, 2, std::max(2, max_width)));
  }
  for (int start = 0; start < n;) {
    if (!fresh[start]) {
      ++start;
      continue;
    }
    int end = start;
    while (end < n && fresh[end]) ++end;
    if (end - start >= min_width) return MergeWindow{start, std::min(end - start, max_width)};
    start = end;
  }
  return std::nullopt;
}

}  // namespace rocksort::store
