// Shared by the place_reads sources: the program's name, the GRCh38
// contigs, the random number streams, and small helpers.
//
// Internal to tools/realistic/place_reads/.
#ifndef ROCKSORT_TOOLS_REALISTIC_PLACE_READS_COMMON_H_
#define ROCKSORT_TOOLS_REALISTIC_PLACE_READS_COMMON_H_

#include <htslib/hts.h>
#include <htslib/sam.h>
#include <htslib/thread_pool.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/hts_handles.h"
#include "split_mix64.h"

namespace rocksort {
namespace place_reads {

constexpr char kProgramName[] = "place_reads";
constexpr char kVersion[] = "1";

#define PLACE_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status place_status_ = (expr);         \
    if (!place_status_.ok()) return place_status_; \
  } while (0)

// GRCh38 primary assembly: chr1..chr22, chrX, chrY, chrM (as kHumanLengths in
// tools/gen_reads/common.h).
constexpr int kNumHumanContigs = 25;
constexpr int64_t kHumanLengths[kNumHumanContigs] = {
    248956422, 242193529, 198295559, 190214555, 181538259, 170805979, 159345973,
    145138636, 138394717, 133797422, 135086622, 133275309, 114364328, 107043718,
    101991189, 90338345,  83257441,  80373285,  58617616,  64444167,  46709983,
    50818468,  156040895, 57227415,  16569};
constexpr const char* kHumanNames[kNumHumanContigs] = {
    "chr1",  "chr2",  "chr3",  "chr4",  "chr5",  "chr6",  "chr7",  "chr8",  "chr9",
    "chr10", "chr11", "chr12", "chr13", "chr14", "chr15", "chr16", "chr17", "chr18",
    "chr19", "chr20", "chr21", "chr22", "chrX",  "chrY",  "chrM"};

// A template whose records cannot be placed after this many draws spans more
// than any contig can hold (never the case for bacterial inputs: the longest
// bacterial chromosome is far shorter than chr21).
constexpr int kMaxPlacementDraws = 10000;

// --unmapped-frac controller: the chance to make a template unmapped is the
// target fraction plus the current shortfall (in templates) divided by this
// many templates, so the running fraction follows the target closely while
// the choice of templates stays random.
constexpr double kUnmappedControlWindow = 1000.0;

// Read names: A00001:101:H66990DSXY:LANE:TILE:X:Y, as a NovaSeq writes them.
// Clusters are visited row by row: x grows by 1..kMaxXStep, then y by
// 1..kMaxYStep for the next row; a tile ends past kMaxY, a lane after
// kTilesPerLane tiles (tiles 1101..1178, 1201..1278, 2101..2178, 2201..2278).
// (lane, tile, y, x) therefore strictly increases and never repeats.
constexpr char kNamePrefix[] = "A00001:101:H66990DSXY";
constexpr int kMaxX = 32000;
constexpr int kMaxXStep = 1600;
constexpr int kFirstY = 1000;
constexpr int kMaxY = 37000;
constexpr int kMaxYStep = 40;
constexpr int kTilesPerSwath = 78;

// Random numbers: SplitMix64 (tools/split_mix64.h), one stream per purpose
// so that (for example) the names do not change when the placement draws a
// different number of times. DO NOT CHANGE the values: they are part of what
// makes a cached benchmark input reproducible.
using Rng = SplitMix64;
enum RngStream : uint64_t {
  kStreamPlacement = 1,
  kStreamUnmapped = 2,
  kStreamNames = 3,
};

inline RecordPtr NewRecord() { return RecordPtr(bam_init1()); }

// Splits `text` at `sep` into *out (empty pieces included).
inline void Split(std::string_view text, char sep, std::vector<std::string_view>* out) {
  out->clear();
  for (;;) {
    const size_t at = text.find(sep);
    out->push_back(text.substr(0, at));
    if (at == std::string_view::npos) return;
    text.remove_prefix(at + 1);
  }
}

}  // namespace place_reads
}  // namespace rocksort

#endif  // ROCKSORT_TOOLS_REALISTIC_PLACE_READS_COMMON_H_
