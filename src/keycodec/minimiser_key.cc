// File: keycodec/minimiser_key.cc
// -----------------------------------------------------------------------------
// samtools sort -M: placed reads (tid >= 0) in coordinate order, then the
// unplaced ones (tid -1) clustered by the minimiser of their sequence, so
// that similar reads lie together and compress better. samtools (bam_sort.c,
// worker_minhash and bam1_cmp_by_minhash) stores the minimiser's hash plus
// 2^30 in the pos and mpos fields of an unplaced read (62 bits survive) and
// its offset o as the template length max(65535 - o, 0); it orders unplaced
// reads by that 62-bit value, then by the template length, larger first,
// then as coordinates (equal positions: forward strand first, the strand
// after the rewrite), then by input order. It reverse-complements a read
// whose minimiser is on the reverse strand, and writes every unplaced read
// with pos -1, mpos -1 and template length 0. Layout (DO NOT CHANGE without
// docs/key_format.md and test/keycodec/minimiser_key_test.cc):
//
//   placed:    the 16-byte coordinate key (keycodec.h)
//   unplaced:  4 bytes  0xFFFFFFFF       (tid -1, as in the coordinate key)
//              8 bytes  (hash + 2^30) mod 2^62, big-endian
//              4 bytes  ~max(65535 - offset, 0), big-endian (larger first)
//              8 bytes  is_reverse << 63 | seq, big-endian
//
// Placed keys differ from unplaced ones in their first 4 bytes, so the two
// layouts never compare past them. Longest key: 24 bytes.
#include <cstdint>
#include <utility>

#include "common/coding.h"
#include "keycodec/key_parts_internal.h"

namespace rocksort::keycodec::internal {
namespace {

// samtools' XOR of every k-mer: it moves the homopolymer k-mers (all A's
// hash to 0) away from the ends of the hash space.
constexpr uint64_t kHashXor = 0xdead7878beef7878;

// 2-bit codes by 4-bit BAM base (=ACMGRSVTWYHKDBN): of the base, and of
// its complement. Every base but A, C, G and T counts as A (code 0) on the
// forward strand and as the complement of T (code 0) on the reverse one.
constexpr uint8_t kForwardCode[16] = {0, 0, 1, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0};
constexpr uint8_t kReverseCode[16] = {0, 3, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};

// The complement of each 4-bit BAM base, as samtools' reverse_complement
// maps their letters: = -> N, A <-> T, C <-> G, M <-> K, R -> Y, S, V <-> B,
// W, Y -> Y, H <-> D, N.
constexpr uint8_t kComplement[16] = {15, 8, 4, 12, 2, 10, 6, 14, 1, 9, 10, 13, 3, 11, 7, 15};

constexpr uint64_t kHashOffset = uint64_t{1} << 30;
constexpr uint64_t kStoredHashMask = (uint64_t{1} << 62) - 1;
constexpr int64_t kOffsetBase = 65535;
constexpr size_t kUnplacedKeySize = 24;

// The template length samtools stores for a minimiser at `offset`.
uint32_t OffsetRank(int64_t offset) {
  return offset <= kOffsetBase ? static_cast<uint32_t>(kOffsetBase - offset) : 0;
}

class MinimiserEncoder : public KeyEncoder {
 public:
  explicit MinimiserEncoder(const MinimiserOptions& options) : options_(options) {}

  absl::Status Append(const bam1_t& record, uint64_t seq, std::string* key) const override {
    Minimiser m;
    return AppendKey(record, seq, key, &m);
  }

  absl::Status AppendAndRewrite(bam1_t* record, uint64_t seq, std::string* key) const override {
    Minimiser m;
    if (absl::Status s = AppendKey(*record, seq, key, &m); !s.ok()) return s;
    if (record->core.tid != -1) return absl::OkStatus();
    if (m.reverse) ReverseComplement(record);
    record->core.pos = -1;
    record->core.mpos = -1;
    record->core.isize = 0;
    return absl::OkStatus();
  }

  size_t max_key_bytes() const override { return kUnplacedKeySize; }

 private:
  // Appends the key; *m is the minimiser of an unplaced record.
  absl::Status AppendKey(const bam1_t& record, uint64_t seq, std::string* key, Minimiser* m) const {
    const bam1_core_t& c = record.core;
    if (c.tid != -1) return AppendCoordinateKey(record, seq, key);
    *m = FindMinimiser(record, options_);
    // The strand as written: the rewrite flips it with the sequence.
    const bool reverse = ((c.flag & BAM_FREVERSE) != 0) != m->reverse;
    char bytes[kUnplacedKeySize];
    PutBigEndian32(0xFFFFFFFF, bytes);
    PutBigEndian64((m->hash + kHashOffset) & kStoredHashMask, bytes + 4);
    PutBigEndian32(~OffsetRank(m->offset), bytes + 12);
    PutBigEndian64((reverse ? uint64_t{1} << 63 : 0) | seq, bytes + 16);
    key->append(bytes, sizeof(bytes));
    return absl::OkStatus();
  }

  const MinimiserOptions options_;
};

// The smallest hash of one strand's k-mers and the index in the read of the
// last base of its k-mer; end_index stays 0 when no k-mer is complete.
struct StrandBest {
  uint64_t hash = UINT64_MAX;
  int64_t end_index = 0;
};

}  // namespace

Minimiser FindMinimiser(const bam1_t& record, const MinimiserOptions& options) {
  const int k = options.kmer;
  const int64_t len = record.core.l_qseq;
  const uint8_t* seq = bam_get_seq(&record);
  const uint64_t mask = (uint64_t{1} << (2 * k)) - 1;
  const uint64_t hash_xor = kHashXor & mask;
  const bool squash = options.squash_homopolymers;

  // One pass over the bases taken (with squashing, each base that differs
  // from the one before) builds both strands' k-mers: forward codes shift
  // in at the bottom, complement codes at the top, so the reverse k-mer is
  // the reverse complement of the forward one. The first k - 1 bases taken
  // fill them; every later one completes a k-mer of each strand.
  StrandBest forward;
  StrandBest backward;
  uint64_t forward_kmer = 0;
  uint64_t backward_kmer = 0;
  const int top = 2 * (k - 1);
  int last = -1;
  int filled = 0;
  for (int64_t i = 0; i < len; ++i) {
    const int base = bam_seqi(seq, i);
    if (squash && base == last) continue;
    last = base;
    forward_kmer = ((forward_kmer << 2) | kForwardCode[base]) & mask;
    backward_kmer = (backward_kmer >> 2) | (uint64_t{kReverseCode[base]} << top);
    if (filled < k - 1) {
      ++filled;
      continue;
    }
    if ((forward_kmer ^ hash_xor) < forward.hash) {
      forward.hash = forward_kmer ^ hash_xor;
      forward.end_index = i;
    }
    if ((backward_kmer ^ hash_xor) < backward.hash) {
      backward.hash = backward_kmer ^ hash_xor;
      // samtools' position of a reverse k-mer: len - i + k - 2.
      backward.end_index = len - i + k - 2;
    }
  }
  // The reverse strand wins only when strictly smaller.
  Minimiser m;
  m.hash = forward.hash;
  int64_t end = forward.end_index;
  if (options.try_reverse && backward.hash < m.hash) {
    m.hash = backward.hash;
    end = backward.end_index;
    m.reverse = true;
  }
  m.offset = end - (k - 1);
  return m;
}

void ReverseComplement(bam1_t* record) {
  uint8_t* seq = bam_get_seq(record);
  uint8_t* qual = bam_get_qual(record);
  int64_t i = 0;
  int64_t j = record->core.l_qseq - 1;
  for (; i < j; ++i, --j) {
    const int a = bam_seqi(seq, i);
    const int b = bam_seqi(seq, j);
    bam_set_seqi(seq, i, kComplement[b]);
    bam_set_seqi(seq, j, kComplement[a]);
    std::swap(qual[i], qual[j]);
  }
  if (i == j) bam_set_seqi(seq, i, kComplement[bam_seqi(seq, i)]);
  record->core.flag ^= BAM_FREVERSE;
}

std::unique_ptr<KeyEncoder> MakeMinimiserEncoder(const MinimiserOptions& options) {
  return std::make_unique<MinimiserEncoder>(options);
}

}  // namespace rocksort::keycodec::internal
