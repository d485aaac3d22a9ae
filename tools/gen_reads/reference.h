// The random reference genome that reads are simulated from.
//
// Internal to tools/gen_reads/.
#ifndef ROCKSORT_TOOLS_GEN_READS_REFERENCE_H_
#define ROCKSORT_TOOLS_GEN_READS_REFERENCE_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common.h"

namespace rocksort {
namespace gen_reads {

// The random reference genome, 2 bits per base (100 Mbp take 25 MB).
// Thread-compatible; immutable after Build().
class Reference {
 public:
  // Sizes n_refs references like human chromosomes (scaled so that they
  // add up to about genome_length bases) and fills them with random bases
  // drawn from `seed`. Fails if one would exceed kMaxRefLength.
  Status Build(int n_refs, uint64_t genome_length, uint64_t seed);

  int size() const { return static_cast<int>(lengths_.size()); }
  const std::string& name(int tid) const { return names_[tid]; }
  int64_t length(int tid) const { return lengths_[tid]; }

  // REQUIRES: 0 <= pos < length(tid). Returns 0..3 for A, C, G, T.
  int Base(int tid, int64_t pos) const {
    const uint64_t g = offsets_[tid] + static_cast<uint64_t>(pos);
    return static_cast<int>((packed_[g >> 5] >> ((g & 31) * 2)) & 3);
  }

  // A locus drawn uniformly over the whole genome, so references receive
  // reads in proportion to their length.
  void RandomLocus(Rng& rng, int32_t* tid, int64_t* pos) const {
    const uint64_t g = rng.Below(offsets_.back());
    const auto it = std::upper_bound(offsets_.begin(), offsets_.end(), g);
    *tid = static_cast<int32_t>(it - offsets_.begin() - 1);
    *pos = static_cast<int64_t>(g - offsets_[*tid]);
  }

 private:
  std::vector<std::string> names_;
  std::vector<int64_t> lengths_;
  std::vector<uint64_t> offsets_;  // size() + 1 entries, genome coordinates
  std::vector<uint64_t> packed_;   // base g in bits 2*(g%32) of word g/32
};

}  // namespace gen_reads
}  // namespace rocksort

#endif  // ROCKSORT_TOOLS_GEN_READS_REFERENCE_H_
