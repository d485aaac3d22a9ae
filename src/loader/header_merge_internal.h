// File: loader/header_merge_internal.h  (internal to loader/ and its tests)
// -----------------------------------------------------------------------------
// Combines the headers of several inputs into the header of one sort, as
// `samtools merge` combines them by default (samtools bam_sort.c,
// trans_tbl_init; neither -c nor -p):
//
//   @HD  the first input's that has one, unchanged (the sort order is
//        applied later, by the pipeline);
//   @SQ  the first input's: every input must list the same references
//        (name, length and, where both give one, M5) in the same order,
//        otherwise the inputs are refused (samtools would renumber them);
//   @RG, @PG  every input's, in input order (all @RG lines, then all @PG
//        lines). An ID already used by an earlier input is made distinct by
//        appending "-%08lX" of lrand48(), as samtools 1.23.1 does (1.16
//        wrote "-%0lX", without leading zeros); the @RG PG: and @PG PP:
//        references of that input follow their renamed @PG lines;
//   @CO  every input's, in input order.
// Header lines of other types (user-defined ones) are dropped, as samtools
// merge drops them.
//
// samtools seeds lrand48 with the time unless given -s; rocksort always
// uses seed kIdSuffixSeed, so that a sort is reproducible: its renamed IDs
// are those of `samtools merge -s 0`.
//
// Records that carry a renamed ID get the new one (RewriteIds), as samtools
// merge rewrites them (bam_translate).
//
// Thread-compatible: plain functions and values.
#ifndef ROCKSORT_LOADER_HEADER_MERGE_INTERNAL_H_
#define ROCKSORT_LOADER_HEADER_MERGE_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/hts_handles.h"
#include "htslib/sam.h"

namespace rocksort::loader {

// The seed of the ID suffixes (see above). Changing it changes outputs.
inline constexpr long kIdSuffixSeed = 0;

// POSIX drand48's generator (X' = 0x5DEECE66D X + 0xB mod 2^48), as glibc
// and htslib's hts_srand48/hts_lrand48 implement it, without the global
// state of lrand48.
class Rand48 {
 public:
  // As srand48(seed): the high 32 bits of the state are the seed's low 32.
  explicit Rand48(long seed)
      : state_((static_cast<uint64_t>(static_cast<uint32_t>(seed)) << 16) | 0x330E) {}
  // As lrand48(): the next value, in [0, 2^31).
  long Next() {
    state_ = (state_ * 0x5DEECE66DULL + 0xB) & ((uint64_t{1} << 48) - 1);
    return static_cast<long>(state_ >> 17);
  }

 private:
  uint64_t state_;
};

// One input's translation of its @RG and @PG IDs into the merged header's.
struct IdTranslation {
  // Every ID of the input's @RG (@PG) lines -> its ID in the merged header.
  // std::less<>: records' values are looked up without a copy.
  std::map<std::string, std::string, std::less<>> rg;
  std::map<std::string, std::string, std::less<>> pg;
  // Some ID of this input was renamed: its records need RewriteIds.
  bool renamed = false;
};

struct MergedHeader {
  HeaderPtr header;
  std::vector<IdTranslation> translations;  // One per input, in order.
};

// Merges headers one input at a time, in input order, as MergeHeaders
// does, so that an input can be closed once its header was added.
class HeaderMerger {
 public:
  HeaderMerger();
  HeaderMerger(const HeaderMerger&) = delete;
  HeaderMerger& operator=(const HeaderMerger&) = delete;
  ~HeaderMerger();

  // Adds the next input's header (`name` names it in messages); htslib
  // parses it in place, hence non-const. REQUIRES: the first header added
  // outlives Finish (its @SQ lines are the merged header's, and every
  // later one is compared with them); later ones need only outlive the
  // call. Errors as MergeHeaders', for this input.
  absl::Status Add(sam_hdr_t* header, const std::string& name);
  // The merged header of the inputs added (at least one). Call once.
  absl::StatusOr<MergedHeader> Finish();

 private:
  sam_hdr_t* first_ = nullptr;
  std::string first_name_;
  bool have_hd_ = false;
  std::string hd_text_;
  Rand48 random_{kIdSuffixSeed};
  std::set<std::string> rg_ids_, pg_ids_;
  std::string rg_text_, pg_text_, co_text_;
  std::vector<IdTranslation> translations_;
};

// Merges `headers` (one per input, in input order; `names` name them in
// messages). REQUIRES: headers.size() == names.size() >= 1; the headers
// outlive the call (htslib parses them in place, hence non-const).
// InvalidArgument naming the input when its @SQ lines differ from the
// first input's (with the first line that differs), or when a header does
// not parse.
absl::StatusOr<MergedHeader> MergeHeaders(const std::vector<sam_hdr_t*>& headers,
                                          const std::vector<std::string>& names);

// Gives `b` the merged header's IDs when its RG or PG tag holds an ID that
// `t` renamed: then, as samtools merge, each of RG and PG whose value `t`
// knows is removed and appended with the translated value (so both move to
// the end of the tags, RG before PG). Unlike samtools merge, a value the
// input's header does not define is kept as it is (samtools drops it),
// and records without renamed IDs are left untouched, so that they are
// those of `samtools cat` + `samtools sort`. ResourceExhausted when the
// record can't grow.
absl::Status RewriteIds(const IdTranslation& t, bam1_t* b);

}  // namespace rocksort::loader

#endif  // ROCKSORT_LOADER_HEADER_MERGE_INTERNAL_H_
