// File: compaction_policy/merge_plan.cc
#include "compaction_policy/merge_plan.h"

#include <algorithm>
#include <cstddef>
#include <limits>

namespace rocksort::compaction_policy {
namespace {

// The exact plan costs O(runs x runs to remove x fan_in) steps; above this
// the cheapest full-width window is good enough (such lanes need several
// rounds of merges anyway, or they have little to remove).
constexpr uint64_t kMaxPlanSteps = uint64_t{1} << 25;

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
  const uint64_t steps = static_cast<uint64_t>(n) * (to_remove + 1) * fan_in;
  if (static_cast<uint64_t>(n) > static_cast<uint64_t>(max_runs) * fan_in ||
      steps > kMaxPlanSteps) {
    return {CheapestFullWindow(prefix, max_runs, fan_in)};
  }

  // cost[i][r]: the fewest bytes rewritten by windows within the first i
  // runs that remove r of them (r counts up to to_remove: removing more is
  // never needed, so a window that overshoots counts as reaching it).
  // width[i][r] is the last window's width (1: run i - 1 is not merged) and
  // from[i][r] the r before it.
  constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();
  const size_t columns = static_cast<size_t>(to_remove) + 1;
  std::vector<uint64_t> cost((n + 1) * columns, kNone);
  std::vector<int> width((n + 1) * columns, 0);
  std::vector<int> from((n + 1) * columns, 0);
  auto at = [columns](int i, int r) { return static_cast<size_t>(i) * columns + r; };
  auto relax = [&](int i, int r, uint64_t c, int w, int r_before) {
    if (c < cost[at(i, r)]) {
      cost[at(i, r)] = c;
      width[at(i, r)] = w;
      from[at(i, r)] = r_before;
    }
  };
  cost[at(0, 0)] = 0;
  for (int i = 0; i < n; ++i) {
    for (int r = 0; r <= to_remove; ++r) {
      const uint64_t c = cost[at(i, r)];
      if (c == kNone) continue;
      relax(i + 1, r, c, 1, r);
      if (r == to_remove) continue;  // Enough removed: the rest stays as it is.
      for (int w = 2; w <= std::min(fan_in, n - i); ++w) {
        relax(i + w, std::min(to_remove, r + w - 1), c + (prefix[i + w] - prefix[i]), w, r);
      }
    }
  }

  std::vector<MergeWindow> plan;
  for (int i = n, r = to_remove; i > 0;) {
    const int w = width[at(i, r)];
    const int r_before = from[at(i, r)];
    if (w > 1) plan.push_back(MergeWindow{i - w, w});
    i -= w;
    r = r_before;
  }
  std::reverse(plan.begin(), plan.end());
  return plan;
}

}  // namespace rocksort::compaction_policy
