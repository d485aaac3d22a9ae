// File: tools/split_mix64.h
// -----------------------------------------------------------------------------
// SplitMix64, the random number generator of the data generators (gen_reads,
// place_reads): tiny, fast and fully specified, so that a generated file
// depends only on its options and seed, never on the C++ library's
// distributions. DO NOT CHANGE the arithmetic: cached benchmark inputs and
// test expectations depend on every bit of it.
//
// Thread-compatible: one generator per thread or stream.
#ifndef ROCKSORT_TOOLS_SPLIT_MIX64_H_
#define ROCKSORT_TOOLS_SPLIT_MIX64_H_

#include <cstdint>

namespace rocksort {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) by multiply-shift; the bias (< n / 2^64) is irrelevant
  // here and the method needs no rejection loop. REQUIRES: n > 0.
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  // Uniform in [0, 1), 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  bool Chance(double p) { return Uniform() < p; }

 private:
  uint64_t state_;
};

// The seed of stream `stream` of a generator seeded with `seed`: independent
// streams for independent purposes.
inline uint64_t StreamSeed(uint64_t seed, uint64_t stream) {
  SplitMix64 mixer(seed ^ (stream * 0xd1b54a32d192ed03ULL));
  return mixer.Next();
}

}  // namespace rocksort

#endif  // ROCKSORT_TOOLS_SPLIT_MIX64_H_
