// File: keycodec/keycodec.h
// -----------------------------------------------------------------------------
// Sort keys for the temporary RocksDB: byte strings whose memcmp order (the
// order of RocksDB's default BytewiseComparator) equals the record order of
// `samtools sort` (coordinate mode), with input order as the final
// tie-breaker, so the sort is stable exactly like samtools'.
//
// Owns nothing; all functions are pure and thread-safe.
//
// Coordinate key layout (kCoordinateKeySize = 16 bytes, all big-endian so
// that memcmp compares them as unsigned integers, most significant first):
//
//   offset  size  field
//   0       4     tid, cast to uint32            (-1 = unmapped -> 0xFFFFFFFF)
//   4       4     pos + 1                        (pos is 0-based, >= -1)
//   8       8     is_reverse << 63 | seq         (seq: 0-based index of the
//                                                 record in the input stream)
//
// Why these fields, in this order: samtools (bam_sort.c, bam1_cmp_core and
// ks_radixsort) orders by tid compared as unsigned, so unmapped reads
// (tid -1) come after every reference; then by pos+1, which maps the
// "no position" value -1 to 0 so it sorts first; then by the reverse-strand
// flag (forward first). It breaks remaining ties by input order (file index,
// then record index), which the trailing sequence number reproduces.
// The strand shares a word with seq, not with pos: pos + 1 then takes all 32
// bits, so every position BAM can store (int32, up to 2^31 - 1, one more than
// the spec allows but accepted by htslib and sorted by samtools) has a key.
// (Up to the seventh session the strand was packed under pos, as in
// samtools' old uint64 key, which left pos = 2^31 - 1 without one.)
//
// This layout is the contract between loader (writes keys) and emitter
// (reads them back only for diagnostics). Keys live only in a temporary DB
// owned by one run, but tests pin the bytes: DO NOT CHANGE THE LAYOUT without
// updating docs/key_format.md and keycodec_test.cc.
#ifndef ROCKSORT_KEYCODEC_KEYCODEC_H_
#define ROCKSORT_KEYCODEC_KEYCODEC_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rocksort::keycodec {

inline constexpr size_t kCoordinateKeySize = 16;

// Largest 0-based position a coordinate key can hold: BAM's int32 limit.
inline constexpr int64_t kMaxPosition = (int64_t{1} << 31) - 1;

// Largest input index a coordinate key can hold (the top bit is the strand).
inline constexpr uint64_t kMaxSequence = (uint64_t{1} << 63) - 1;

// The decoded content of a coordinate key.
struct CoordinateKey {
  int32_t tid = -1;      // Reference index; -1 for unmapped.
  int64_t pos = -1;      // 0-based leftmost position; -1 for none.
  bool reverse = false;  // BAM_FREVERSE (0x10) set.
  uint64_t seq = 0;      // Input order of the record, starting at 0.

  friend bool operator==(const CoordinateKey& a, const CoordinateKey& b) {
    return a.tid == b.tid && a.pos == b.pos && a.reverse == b.reverse &&
           a.seq == b.seq;
  }
};

// Returns OK when (tid, pos) can be encoded: tid >= -1 and
// -1 <= pos <= kMaxPosition. Otherwise InvalidArgument naming the field.
absl::Status CheckCoordinate(int32_t tid, int64_t pos);

// Writes the 16-byte key of `key` to out[0..15].
// REQUIRES: CheckCoordinate(key.tid, key.pos).ok(); key.seq <= kMaxSequence;
// `out` has 16 bytes.
void EncodeCoordinateKey(const CoordinateKey& key, char* out);

// Parses a key written by EncodeCoordinateKey. DataLoss if `bytes` is not a
// well-formed coordinate key (wrong length).
absl::StatusOr<CoordinateKey> DecodeCoordinateKey(absl::string_view bytes);

// The reference order the keys implement, written the way samtools writes
// it (tid as unsigned, pos + 1, strand, then input order). Used by tests to
// check that memcmp on encoded keys agrees with it; not used on the hot path.
bool SamtoolsCoordinateLess(const CoordinateKey& a, const CoordinateKey& b);

}  // namespace rocksort::keycodec

#endif  // ROCKSORT_KEYCODEC_KEYCODEC_H_
