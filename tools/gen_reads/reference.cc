#include "reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace rocksort {
namespace gen_reads {

Status Reference::Build(int n_refs, uint64_t genome_length, uint64_t seed) {
  std::vector<double> weights;
  for (int i = 0; i < n_refs; ++i) {
    if (i < kNumHumanLengths) {
      weights.push_back(static_cast<double>(kHumanLengths[i]));
      names_.push_back(i < 22    ? "chr" + std::to_string(i + 1)
                       : i == 22 ? "chrX"
                       : i == 23 ? "chrY"
                                 : "chrM");
    } else {
      // Beyond the primary assembly: small contigs, like the unplaced
      // scaffolds of GRCh38 (tens to hundreds of kilobases).
      weights.push_back(20000.0 +
                        static_cast<double>((static_cast<uint64_t>(i) * 104729) % 280000));
      names_.push_back("chrUn_sim" + std::to_string(i + 1));
    }
  }
  double total_weight = 0;
  for (double w : weights) total_weight += w;

  offsets_.push_back(0);
  for (int i = 0; i < n_refs; ++i) {
    const double scaled =
        std::round(static_cast<double>(genome_length) * weights[i] / total_weight);
    const int64_t length = std::max(kMinRefLength, static_cast<int64_t>(scaled));
    if (length > kMaxRefLength) {
      return Status::Error("--genome-length too large for --refs " + std::to_string(n_refs) + ": " +
                           names_[i] + " would exceed 2^31-2 bases");
    }
    lengths_.push_back(length);
    offsets_.push_back(offsets_.back() + static_cast<uint64_t>(length));
  }

  Rng rng(StreamSeed(seed, kStreamReference));
  packed_.resize((offsets_.back() + 31) / 32);
  for (uint64_t& word : packed_) word = rng.Next();
  return Status::Ok();
}

}  // namespace gen_reads
}  // namespace rocksort
