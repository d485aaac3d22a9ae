#include "read_simulator.h"

#include <htslib/sam.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rocksort {
namespace gen_reads {
namespace {

void PushCigar(std::vector<uint32_t>* cigar, int op, uint32_t len) {
  if (!cigar->empty() && static_cast<int>(bam_cigar_op(cigar->back())) == op) {
    cigar->back() += len << BAM_CIGAR_SHIFT;
  } else {
    cigar->push_back(bam_cigar_gen(len, op));
  }
}

// Writes n random bases to out[0..n).
void RandomBases(Rng& rng, size_t n, char* out) {
  uint64_t bits = 0;
  for (size_t i = 0; i < n; ++i) {
    if ((i & 31) == 0) bits = rng.Next();
    out[i] = kBases[bits & 3];
    bits >>= 2;
  }
}

// Hands out one 64-bit draw in pieces, for per-base decisions that need
// fewer bits than a whole draw.
class BitSource {
 public:
  explicit BitSource(Rng* rng) : rng_(rng) {}
  uint32_t Take32() {
    if (left32_ == 0) {
      bits32_ = rng_->Next();
      left32_ = 2;
    }
    --left32_;
    const uint32_t v = static_cast<uint32_t>(bits32_);
    bits32_ >>= 32;
    return v;
  }
  uint32_t Take16() {
    if (left16_ == 0) {
      bits16_ = rng_->Next();
      left16_ = 4;
    }
    --left16_;
    const uint32_t v = static_cast<uint32_t>(bits16_ & 0xffff);
    bits16_ >>= 16;
    return v;
  }

 private:
  Rng* rng_;  // not owned
  uint64_t bits32_ = 0;
  uint64_t bits16_ = 0;
  int left32_ = 0;
  int left16_ = 0;
};

}  // namespace

void AppendNumber(std::string* out, int64_t value) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  (void)ec;  // 24 chars always suffice for an int64
  out->append(buf, end);
}

void CigarToString(const std::vector<uint32_t>& cigar, bool hard_as_soft, std::string* out) {
  out->clear();
  for (uint32_t c : cigar) {
    AppendNumber(out, bam_cigar_oplen(c));
    int op = bam_cigar_op(c);
    if (hard_as_soft && op == BAM_CHARD_CLIP) op = BAM_CSOFT_CLIP;
    out->push_back(BAM_CIGAR_STR[op]);
  }
}

void AppendRandomBases(Rng& rng, size_t n, std::string* out) {
  const size_t old_size = out->size();
  out->resize(old_size + n);
  RandomBases(rng, n, out->data() + old_size);
}

void ReadSimulator::MakeQualities(int len, bool reverse, Rng& rng, std::string* qual) {
  if (len != threshold_len_) ComputeLowThresholds(len);
  qual->resize(len);
  char* out = qual->data();
  int tail_start = len;
  if (len >= 20 && rng.Below(100) < 6) {
    tail_start = len - 1 - static_cast<int>(rng.Below(len / 5));
  }
  // This loop runs for every base of the output, so the common case (a
  // Q37 base) costs 16 random bits; rarer branches draw more.
  BitSource bits(&rng);
  uint8_t state = kQualHigh;
  for (int i = 0; i < len; ++i) {
    const uint32_t r16 = bits.Take16();
    uint8_t q = kQualHigh;
    if (i >= tail_start) {
      q = kQualTail;
    } else if (state != kQualHigh && (rng.Next() & 1) != 0) {
      q = state;  // low-quality runs continue with probability 1/2
    } else if (r16 < low_threshold_[i]) {
      const uint64_t pick = rng.Below(10);
      q = pick < 6 ? kQualMid : pick < 9 ? kQualLow : kQualTail;
    }
    state = q;
    out[reverse ? len - 1 - i : i] = static_cast<char>(q);
  }
}

void ReadSimulator::Align(int32_t tid, int64_t pos, int lead_clip, int aligned, int trail_clip,
                          const char* qual, Rng& rng, Alignment* a) {
  a->tid = tid;
  a->pos = pos;
  a->cigar.clear();
  a->md.clear();
  a->nm = 0;
  int32_t score = 0;
  const int64_t ref_len = ref_->length(tid);
  const int query_len = lead_clip + aligned + trail_clip;
  a->seq.resize(query_len);
  char* seq = a->seq.data();

  if (lead_clip > 0) {
    RandomBases(rng, lead_clip, seq);
    PushCigar(&a->cigar, BAM_CSOFT_CLIP, lead_clip);
  }
  int q = lead_clip;  // query bases produced so far
  const int aligned_end = lead_clip + aligned;
  int64_t r = pos;
  int64_t match_run = 0;  // bases since the last MD event
  uint32_t m_run = 0;     // pending CIGAR M length, pushed on op change
  // An alignment never starts with an indel and never has two in a row.
  bool after_indel = true;
  BitSource bits(&rng);
  while (q < aligned_end && r < ref_len) {
    const uint32_t event = bits.Take32();
    if (event < kIndelBand) {
      // Indels need an aligned base after them, in query and reference.
      if (!after_indel && q + 1 < aligned_end && r + 1 < ref_len) {
        if (m_run > 0) PushCigar(&a->cigar, BAM_CMATCH, m_run);
        m_run = 0;
        const uint64_t aux = rng.Next();
        if (event < kInsertionThreshold) {
          const int len = std::min<int>(1 + aux % 3, aligned_end - q - 1);
          RandomBases(rng, len, seq + q);
          PushCigar(&a->cigar, BAM_CINS, len);
          a->nm += len;
          score -= 6 + len;
          q += len;
        } else {
          const int len = static_cast<int>(std::min<int64_t>(1 + aux % 3, ref_len - r - 1));
          AppendNumber(&a->md, match_run);
          match_run = 0;
          a->md.push_back('^');
          for (int j = 0; j < len; ++j) {
            a->md.push_back(kBases[ref_->Base(tid, r + j)]);
          }
          PushCigar(&a->cigar, BAM_CDEL, len);
          a->nm += len;
          score -= 6 + len;
          r += len;
        }
        after_indel = true;
        continue;
      }
    }
    const int ref_base = ref_->Base(tid, r);
    // Mismatches own the band of `event` just above the indel bands.
    const uint32_t mm = mismatch_threshold_[static_cast<uint8_t>(qual[q])];
    if (event >= kIndelBand && event - kIndelBand < mm) {
      seq[q] = kBases[(ref_base + 1 + rng.Below(3)) & 3];
      AppendNumber(&a->md, match_run);
      match_run = 0;
      a->md.push_back(kBases[ref_base]);
      ++a->nm;
      score -= 4;
    } else {
      seq[q] = kBases[ref_base];
      ++match_run;
      ++score;
    }
    ++m_run;
    ++q;
    ++r;
    after_indel = false;
  }
  if (m_run > 0) PushCigar(&a->cigar, BAM_CMATCH, m_run);
  AppendNumber(&a->md, match_run);
  if (q < query_len) {
    RandomBases(rng, query_len - q, seq + q);
    PushCigar(&a->cigar, BAM_CSOFT_CLIP, query_len - q);
  }
  a->score = std::max(score, 0);
  a->ref_span = r - pos;
}

}  // namespace gen_reads
}  // namespace rocksort
