// Read simulation: base qualities and alignments copied from the
// reference with sequencing errors, plus the small helpers for CIGARs and
// random bases that the generator shares.
//
// Internal to tools/gen_reads/.
#ifndef ROCKSORT_TOOLS_GEN_READS_READ_SIMULATOR_H_
#define ROCKSORT_TOOLS_GEN_READS_READ_SIMULATOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common.h"
#include "reference.h"

namespace rocksort {
namespace gen_reads {

// One alignment of one record, in SAM orientation (SEQ and QUAL run along
// the forward reference strand even for reverse-strand reads). Buffers are
// reused from record to record, so the hot loop does not allocate once they
// have grown to the largest record.
struct Alignment {
  int32_t tid = -1;
  int64_t pos = -1;
  bool reverse = false;
  uint8_t mapq = 0;
  std::vector<uint32_t> cigar;  // BAM encoding: len << 4 | op
  std::string seq;              // A/C/G/T letters
  std::string qual;             // raw Phred values (not +33)
  std::string md;
  int32_t nm = 0;
  int32_t score = 0;     // BWA-like: +1 match, -4 mismatch, -(6+len) gaps
  int64_t ref_span = 0;  // reference bases covered (M + D)
};

// Appends `value` in decimal.
void AppendNumber(std::string* out, int64_t value);

// CIGAR as SAM text. SA:Z wants soft clips where the record has hard clips.
void CigarToString(const std::vector<uint32_t>& cigar, bool hard_as_soft, std::string* out);

// Appends n random bases (A/C/G/T).
void AppendRandomBases(Rng& rng, size_t n, std::string* out);

// Produces base qualities and alignments. Not thread-safe (owns caches).
class ReadSimulator {
 public:
  explicit ReadSimulator(const Reference* ref) : ref_(ref) {
    // Mismatch probability by quality bin.
    SetMismatchRate(kQualHigh, 0.004);
    SetMismatchRate(kQualMid, 0.02);
    SetMismatchRate(kQualLow, 0.06);
    SetMismatchRate(kQualTail, 0.15);
  }

  // Fills *qual with `len` binned qualities in SAM orientation. In
  // sequencing order quality drops towards the 3' end, low values come in
  // runs, and some reads end in a Q2 tail (Illumina's "#" marking); a
  // reverse-strand read is stored reversed, so its 3' end is on the left.
  void MakeQualities(int len, bool reverse, Rng& rng, std::string* qual);

  // Simulates an alignment starting at reference position `pos` of `tid`:
  // `lead_clip` soft-clipped bases, up to `aligned` bases copied from the
  // reference with errors, then `trail_clip` soft-clipped bases. If the
  // reference ends first, the remaining query bases are soft-clipped too, so
  // the query length is always lead_clip + aligned + trail_clip. Clipped
  // bases are random. `qual` covers the whole query and drives the error
  // rate. Sets tid, pos, cigar, seq, md, nm, score and ref_span of *a; leaves
  // reverse, mapq and qual alone.
  // REQUIRES: 0 <= pos < ref length, aligned >= 1.
  void Align(int32_t tid, int64_t pos, int lead_clip, int aligned, int trail_clip, const char* qual,
             Rng& rng, Alignment* a);

 private:
  void SetMismatchRate(uint8_t q, double p) {
    mismatch_threshold_[q] = static_cast<uint32_t>(p * 4294967296.0);
  }

  // P(start of a low-quality stretch at cycle i) = 1.5% + 15% * (i/len)^2,
  // in units of 2^-16.
  void ComputeLowThresholds(int len) {
    low_threshold_.resize(len);
    for (int i = 0; i < len; ++i) {
      const double frac = static_cast<double>(i) / len;
      low_threshold_[i] = static_cast<uint32_t>((0.015 + 0.15 * frac * frac) * 65536.0);
    }
    threshold_len_ = len;
  }

  const Reference* ref_;  // not owned
  uint32_t mismatch_threshold_[256] = {};
  std::vector<uint32_t> low_threshold_;
  int threshold_len_ = -1;
};

}  // namespace gen_reads
}  // namespace rocksort

#endif  // ROCKSORT_TOOLS_GEN_READS_READ_SIMULATOR_H_
