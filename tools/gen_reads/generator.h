// The generator proper: plans pairs, simulates their records (with
// supplementary and secondary alignments), spreads the --edge-cases records
// through the file and decides when --target-bytes is reached.
//
// Internal to tools/gen_reads/.
#ifndef ROCKSORT_TOOLS_GEN_READS_GENERATOR_H_
#define ROCKSORT_TOOLS_GEN_READS_GENERATOR_H_

#include <htslib/sam.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common.h"
#include "options.h"
#include "read_simulator.h"
#include "reference.h"
#include "writer.h"

namespace rocksort {
namespace gen_reads {

enum class PairKind { kProper, kDiscordant, kOneUnmapped, kBothUnmapped };

// How to place a pair. Negative fields mean "choose at random".
struct PairPlan {
  PairKind kind = PairKind::kProper;
  int32_t tid = -1;  // read 1's reference (kProper, kOneUnmapped)
  int64_t pos = -1;  // read 1's POS - 1 (kProper only)
  int reverse = -1;  // read 1's strand (kProper only)
};

enum class EdgeKind {
  kLongRead,
  kManyCigarOps,
  kHugeIntArray,
  kHugeString,
  kFirstBase,
  kLastBase,
  kLastReference,
  kMateUnmapped,
  kBothUnmapped,
  kTieBurst,
  kCount,  // not a kind
};
constexpr int kEdgeKinds = static_cast<int>(EdgeKind::kCount);
constexpr int kEdgeSlots = kEdgeKinds * kEdgeRepeats;

// Writes the whole output for one set of options. Not thread-safe; one
// instance per run.
class Generator {
 public:
  Generator(const Options& opts, const Reference& ref)
      : opts_(opts),
        ref_(ref),
        sim_(&ref),
        pair_rng_(StreamSeed(opts.seed, kStreamPairs)),
        name_rng_(StreamSeed(opts.seed, kStreamNames)),
        edge_rng_(StreamSeed(opts.seed, kStreamEdge)) {
    fragment_mean_ = std::max(opts.read_length + 50.0, std::round(opts.read_length * 7.0 / 3.0));
    fragment_sd_ = fragment_mean_ / 7.0;
  }

  // Opens the output, writes every record and closes it. `header` must
  // outlive the call.
  Status Run(sam_hdr_t* header);

  uint64_t pairs() const { return pairs_; }
  uint64_t records() const { return records_; }
  uint64_t edge_records() const { return edge_records_; }
  uint64_t bytes() const { return bytes_; }

 private:
  struct RecentRead {
    int32_t tid;
    int64_t pos;
    bool reverse;
  };

  // --- Ordinary pairs (generator.cc) ------------------------------------------

  // Draws the kind of the next pair, and a recent read's coordinate for a
  // --tie-frac tie.
  PairPlan PlanPair(Rng& rng);
  int64_t FragmentLength(Rng& rng);
  // The next pair's read name (also kept in name_).
  const std::string& NextName();

  // Simulates mate i's primary alignment (quality already in mates_[i].qual),
  // plus its supplementary and secondary alignments when drawn.
  void SimulateMapped(int i, int32_t tid, int64_t pos, bool reverse, Rng& rng);

  void AddAlignmentTags(const Alignment& a);
  void AddScoreTags(const Alignment& a, Rng& rng);
  void AppendSaEntry(const Alignment& a);

  // Simulates the pair `plan` describes and writes read 1, read 2 and their
  // supplementary and secondary records.
  Status EmitPair(const PairPlan& plan, Rng& rng);

  // --- Edge cases (edge_cases.cc) --------------------------------------------

  // Slot s is due once the pair count reaches (s + 0.5) / kEdgeSlots of the
  // expected total; kinds cycle, so every kind recurs in each quarter.
  Status EmitDueEdgeCases(double expected_pairs);

  Status EmitEdgeCase(EdgeKind kind, int repeat);

  // Writes `copies` single-end records of *a, each with a fresh name.
  Status WriteSingleEnd(const Alignment& a, EdgeKind kind, int copies);

  const Options& opts_;
  const Reference& ref_;
  ReadSimulator sim_;
  Writer writer_;
  Rng pair_rng_;  // ordinary pairs
  Rng name_rng_;  // x/y jitter in read names
  Rng edge_rng_;  // --edge-cases records
  double fragment_mean_ = 0;
  double fragment_sd_ = 0;

  // Scratch reused for every pair.
  Alignment mates_[2];
  Alignment sups_[2];
  Alignment secs_[2];
  bool has_sup_[2] = {false, false};
  bool has_sec_[2] = {false, false};
  Alignment single_;
  AuxBuilder aux_;
  std::string name_;
  std::string mate_cigar_;
  std::string cigar_text_;
  std::string sa_;
  std::vector<int32_t> huge_array_;
  std::string huge_string_;

  RecentRead recent_[kRecentReadSlots] = {};
  int n_recent_ = 0;
  int recent_next_ = 0;

  uint64_t name_serial_ = 0;
  uint64_t pairs_ = 0;           // ordinary and edge-case pairs
  uint64_t ordinary_pairs_ = 0;  // drives checkpoints and edge slots
  int next_edge_slot_ = 0;
  uint64_t edge_records_ = 0;
  uint64_t records_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace gen_reads
}  // namespace rocksort

#endif  // ROCKSORT_TOOLS_GEN_READS_GENERATOR_H_
