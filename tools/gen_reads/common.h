// Shared by the gen_reads sources: the program's name, the simulation
// constants, a minimal Status and the random number generator.
//
// Internal to tools/gen_reads/; nothing outside it includes this.
#ifndef ROCKSORT_TOOLS_GEN_READS_COMMON_H_
#define ROCKSORT_TOOLS_GEN_READS_COMMON_H_

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "split_mix64.h"

namespace rocksort {
namespace gen_reads {

constexpr char kProgramName[] = "gen_reads";
constexpr char kVersion[] = "0.1";

// ---------------------------------------------------------------------------
// Simulation constants. Rates are per pair, per record or per base as named.

constexpr double kDiscordantFrac = 0.005;     // per pair: mates placed apart
constexpr double kSupplementaryFrac = 0.005;  // per mapped primary record
constexpr double kSecondaryFrac = 0.005;      // per mapped primary record
constexpr double kSoftClip3PrimeFrac = 0.04;  // adapter read-through
constexpr double kSoftClip5PrimeFrac = 0.01;
constexpr int kMinClipReadLength = 40;      // shorter reads are never clipped
constexpr int kMinChimericReadLength = 60;  // both parts need >= 15 bases
constexpr int kRecentReadSlots = 64;        // tie candidates for --tie-frac

// Per-base event thresholds, as fractions of 2^32 (each aligned base gets 32
// random bits). Mismatch rates (ReadSimulator) depend on the base quality so
// that errors cluster where an aligner would expect them.
constexpr uint32_t kInsertionThreshold = 858993;  // 0.0002
constexpr uint32_t kDeletionThreshold = 858993;   // 0.0002
constexpr uint32_t kIndelBand = kInsertionThreshold + kDeletionThreshold;

// Illumina-style binned base qualities; 37 dominates.
constexpr uint8_t kQualHigh = 37;
constexpr uint8_t kQualMid = 23;
constexpr uint8_t kQualLow = 12;
constexpr uint8_t kQualTail = 2;

// Read names are SIM:1:FC01:<lane>:<tile>:<x>:<y>. Each pair gets a serial
// number; lane, tile and y are derived from it so names never repeat (y
// grows by 4 per cluster inside a tile, and the random jitter is below 4).
constexpr uint64_t kClustersPerTile = 50000;
constexpr uint64_t kTilesPerLane = 96;  // 2 surfaces x 3 swaths x 16 tiles

// Edge cases (--edge-cases). Each kind is emitted kEdgeRepeats times, spread
// evenly through the file.
constexpr int kEdgeRepeats = 4;
constexpr int kLongReadLength = 70000;  // record > 64 KiB
constexpr int kManyOpsPairs = 40000;    // 1M1I x 40000 = 80000 CIGAR ops
constexpr int kHugeArrayElements = 100000;
constexpr int kHugeStringLength = 100000;
constexpr int kTieBurstSize = 50;
// The first reference must hold the long read and the many-op record.
constexpr int64_t kMinEdgeFirstRefLength = 100000;

constexpr int64_t kMinRefLength = 1000;
constexpr int64_t kMaxRefLength = std::numeric_limits<int32_t>::max() - 1;
constexpr uint64_t kMaxGenomeLength = 16ULL << 30;  // 4 GiB of packed bases
constexpr int kMaxReadLength = 100000;

// --target-bytes checkpoints: the first sample is taken after this many
// pairs; afterwards the step is half the estimated remaining pairs until the
// estimate drops below kHalvingLimit, then the whole estimate (at least
// kMinCheckpointStep). This needs ~20 flushes for 1 GiB and overshoots the
// target by a fraction of one small step.
constexpr uint64_t kFirstCheckpointPairs = 16;
constexpr uint64_t kHalvingLimit = 4096;
constexpr uint64_t kMinCheckpointStep = 16;

// GRCh38 primary chromosome lengths (chr1..chr22, chrX, chrY, chrM). Only
// the proportions are used; they are scaled to --genome-length.
constexpr int64_t kHumanLengths[] = {248956422, 242193529, 198295559, 190214555, 181538259,
                                     170805979, 159345973, 145138636, 138394717, 133797422,
                                     135086622, 133275309, 114364328, 107043718, 101991189,
                                     90338345,  83257441,  80373285,  58617616,  64444167,
                                     46709983,  50818468,  156040895, 57227415,  16569};
constexpr int kNumHumanLengths = sizeof(kHumanLengths) / sizeof(kHumanLengths[0]);

constexpr char kBases[] = "ACGT";
constexpr char kReadGroup[] = "SIM.1";

// ---------------------------------------------------------------------------
// Minimal error value: an empty message means success.

class [[nodiscard]] Status {
 public:
  static Status Ok() { return Status(); }
  static Status Error(std::string message) {
    Status s;
    s.message_ = std::move(message);
    return s;
  }
  bool ok() const { return message_.empty(); }
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

#define GEN_RETURN_IF_ERROR(expr)      \
  do {                                 \
    Status status_ = (expr);           \
    if (!status_.ok()) return status_; \
  } while (0)

// ---------------------------------------------------------------------------
// Random numbers: SplitMix64 (tools/split_mix64.h), fully specified, so the
// output does not depend on the C++ library's distribution implementations.
// Streams for different purposes are seeded independently (StreamSeed) so
// that, for example, the sequence of ordinary pairs does not change when
// --edge-cases inserts extra records.
using Rng = SplitMix64;

enum RngStream : uint64_t {
  kStreamReference = 1,
  kStreamPairs = 2,
  kStreamNames = 3,
  kStreamEdge = 4,
};

}  // namespace gen_reads
}  // namespace rocksort

#endif  // ROCKSORT_TOOLS_GEN_READS_COMMON_H_
