// Where templates go and what they are called: random places on the
// GRCh38 primary contigs, and Illumina-style read names.
//
// Internal to tools/realistic/place_reads/.
#ifndef ROCKSORT_TOOLS_REALISTIC_PLACE_READS_TARGETS_H_
#define ROCKSORT_TOOLS_REALISTIC_PLACE_READS_TARGETS_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_format.h"
#include "common.h"

namespace rocksort {
namespace place_reads {

// ---------------------------------------------------------------------------
// The GRCh38 primary contigs as a target for random placement.

class HumanGenome {
 public:
  HumanGenome() {
    int64_t total = 0;
    for (int i = 0; i < kNumHumanContigs; ++i) {
      starts_[i] = total;
      total += kHumanLengths[i];
    }
    total_ = total;
  }

  static int64_t Length(int tid) { return kHumanLengths[tid]; }

  // Draws a contig (weighted by length) and a 0-based start on it such that
  // [start, start + span) fits, drawing again while it does not. Contigs with
  // avoid[tid] set are drawn again too, unless all of them are set.
  // Returns false if no fitting place was found in kMaxPlacementDraws draws.
  bool Place(Rng& rng, int64_t span, const bool* avoid, int* tid, int64_t* start) const {
    const bool all_avoided = std::all_of(avoid, avoid + kNumHumanContigs, [](bool b) { return b; });
    for (int draw = 0; draw < kMaxPlacementDraws; ++draw) {
      const int64_t g = static_cast<int64_t>(rng.Below(total_));
      const int t =
          static_cast<int>(std::upper_bound(starts_, starts_ + kNumHumanContigs, g) - starts_ - 1);
      const int64_t p = g - starts_[t];
      if (p + span > kHumanLengths[t]) continue;  // would run off the end
      if (avoid[t] && !all_avoided) continue;
      *tid = t;
      *start = p;
      return true;
    }
    return false;
  }

 private:
  int64_t starts_[kNumHumanContigs];
  int64_t total_;
};

// ---------------------------------------------------------------------------
// Illumina-style read names.

class IlluminaNamer {
 public:
  explicit IlluminaNamer(uint64_t seed) : rng_(seed) {}

  // The next name; strictly greater in (lane, tile, y, x) than the last.
  const std::string& Next() {
    if (first_) {
      first_ = false;
      x_ = 1 + static_cast<int>(rng_.Below(kMaxXStep));
    } else {
      x_ += 1 + static_cast<int>(rng_.Below(kMaxXStep));
      if (x_ > kMaxX) {
        x_ = 1 + static_cast<int>(rng_.Below(kMaxXStep));
        y_ += 1 + static_cast<int>(rng_.Below(kMaxYStep));
        if (y_ > kMaxY) {
          y_ = kFirstY;
          if (++tile_index_ == 4 * kTilesPerSwath) {
            tile_index_ = 0;
            ++lane_;
          }
        }
      }
    }
    // Tiles: surface 1..2, swath 1..2, tile 01..78.
    const int surface = 1 + tile_index_ / (2 * kTilesPerSwath);
    const int swath = 1 + (tile_index_ / kTilesPerSwath) % 2;
    const int tile = surface * 1000 + swath * 100 + 1 + tile_index_ % kTilesPerSwath;
    name_ = absl::StrFormat("%s:%d:%d:%d:%d", kNamePrefix, lane_, tile, x_, y_);
    return name_;
  }

 private:
  Rng rng_;
  bool first_ = true;
  int lane_ = 1;
  int tile_index_ = 0;
  int x_ = 0;
  int y_ = kFirstY;
  std::string name_;
};

}  // namespace place_reads
}  // namespace rocksort

#endif  // ROCKSORT_TOOLS_REALISTIC_PLACE_READS_TARGETS_H_
