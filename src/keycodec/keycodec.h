// File: keycodec/keycodec.h
// -----------------------------------------------------------------------------
// Sort keys for the temporary RocksDB: byte strings whose memcmp order (the
// order of RocksDB's default BytewiseComparator) equals the record order of
// `samtools sort` 1.23.1 in the chosen SortOrder (sort_order.h), with the
// record's input index as the last field, so the sort is stable exactly like
// samtools' (which breaks ties by file, then record index). No comparator
// runs on the hot path: RocksDB compares bytes.
//
// KeyEncoder is the interface the loader calls per record; MakeKeyEncoder
// picks the encoder of an order: coordinate (below), query name natural or
// lexicographic (name_key.cc), tag then coordinate or name (tag_key.cc),
// template-coordinate (template_coordinate_key.cc), minimiser
// (minimiser_key.cc). docs/key_format.md
// states each order's layout byte by byte and the longest key it produces.
//
// The coordinate key, below, is fixed at 16 bytes (kCoordinateKeySize, all
// big-endian so that memcmp compares them as unsigned integers, most
// significant first):
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
//
// Keys live only in a temporary DB owned by one run, but tests pin the
// bytes: DO NOT CHANGE A LAYOUT without updating docs/key_format.md and the
// tests under test/keycodec/.
//
// Encoders are immutable after construction; Append is thread-safe.
#ifndef ROCKSORT_KEYCODEC_KEYCODEC_H_
#define ROCKSORT_KEYCODEC_KEYCODEC_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "htslib/sam.h"
#include "keycodec/sort_order.h"

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
    return a.tid == b.tid && a.pos == b.pos && a.reverse == b.reverse && a.seq == b.seq;
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

// Appends the sort key of one record to a caller-owned buffer.
class KeyEncoder {
 public:
  virtual ~KeyEncoder() = default;

  // Appends the key of `record`, the `seq`-th record of the input (0-based,
  // below 2^63), to *key. The key ends with `seq`, so keys of distinct
  // records differ. InvalidArgument (a message without the read name or
  // file, which the caller adds) when the record has no key in this order:
  // a position outside BAM's range (coordinate and tag-then-coordinate), a
  // read name over 254 bytes (orders that encode the name), or for
  // template-coordinate a paired record with a mapped mate but no MC tag,
  // an MC or MI tag that is not a string, as samtools refuses them. On
  // error *key is unchanged.
  virtual absl::Status Append(const bam1_t& record, uint64_t seq, std::string* key) const = 0;
  // As Append, then changes *record as samtools' sort changes it before
  // writing it: only the minimiser order does (an unplaced read whose
  // minimiser is on the reverse strand is reverse-complemented, and every
  // unplaced read gets pos -1, mate pos -1 and template length 0). The
  // loader stores what this leaves. On error neither is changed.
  virtual absl::Status AppendAndRewrite(bam1_t* record, uint64_t seq, std::string* key) const {
    return Append(*record, seq, key);
  }

  // The longest key Append produces, bytes (for the memory model): exact for
  // coordinate and name orders. For -t on a Z/H tag and for
  // template-coordinate (MI) it assumes that string is at most 1024 bytes;
  // a longer one makes a longer key, still correctly ordered
  // (docs/key_format.md).
  virtual size_t max_key_bytes() const = 0;
};

// The encoder of `order`. `header` is the input's (template-coordinate reads
// each read group's library, LB, from it; htslib may parse its text lazily,
// so no other thread may use it during the call); it is not kept.
// InvalidArgument for an order SortOrder::FromFlags cannot produce (a tag
// that is not two characters, or a tag with template-coordinate).
absl::StatusOr<std::unique_ptr<KeyEncoder>> MakeKeyEncoder(const SortOrder& order,
                                                           const sam_hdr_t& header);

}  // namespace rocksort::keycodec

#endif  // ROCKSORT_KEYCODEC_KEYCODEC_H_
