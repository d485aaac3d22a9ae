// File: keycodec/key_parts_internal.h
// -----------------------------------------------------------------------------
// Building blocks shared by the key encoders of keycodec/: the read-name key
// (natural and lexicographic) with its flag byte, the order-preserving
// encodings of signed integers and doubles, the molecular-identifier string
// of template-coordinate order, the aux-tag lookup that mirrors htslib's
// bam_aux_get, samtools' unclipped 5' positions, and the constructors of the
// encoders that MakeKeyEncoder (coordinate_key.cc) dispatches to.
//
// INTERNAL to keycodec/ and its tests; other modules include keycodec.h only.
// Every Append* writes bytes whose memcmp order is the order stated on it;
// the layouts are part of the key contract (docs/key_format.md): DO NOT
// CHANGE them without changing that page and test/keycodec/.
//
// Pure functions on their arguments; thread-safe.
#ifndef ROCKSORT_KEYCODEC_KEY_PARTS_INTERNAL_H_
#define ROCKSORT_KEYCODEC_KEY_PARTS_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "htslib/sam.h"
#include "keycodec/keycodec.h"
#include "keycodec/sort_order.h"

namespace rocksort::keycodec::internal {

// Longest read name htslib produces: BAM stores its length with the NUL in a
// uint8 (l_read_name), and sam_parse1 / bam_set1 refuse longer names.
inline constexpr size_t kMaxNameLength = 254;

// Bytes of the trailing input index of every key.
inline constexpr size_t kSeqBytes = 8;

// The nominal longest aux string (a -t tag's Z/H value, an MI value) that
// max_key_bytes() accounts for. Longer strings are encoded in full, so the
// order stays exact; only the bound no longer holds for such a record.
inline constexpr size_t kBoundedTagStringBytes = 1024;

// ---- Read names ------------------------------------------------------------

// The read name of `record` (without its NUL; never longer than l_qname).
absl::string_view QueryName(const bam1_t& record);

// InvalidArgument when `name` is longer than kMaxNameLength (htslib never
// produces such a record; the bounds below rely on it).
absl::Status CheckNameLength(absl::string_view name);

// Appends `name` so that memcmp orders names as samtools' strnum_cmp with
// natural sorting: each non-digit byte is copied; each maximal run of ASCII
// digits becomes 0x30 (the marker: no non-digit byte lies between '/' and
// ':', so the marker compares against a non-digit byte exactly as any digit
// would), the count of its significant digits (leading zeros dropped, so
// 'a01' and 'a1' tie), then those digits. A 0x00 ends the name, so a name
// that is a token prefix of another sorts first. A digit run never follows a
// digit run, so the encoding is unambiguous.
// REQUIRES: name.size() <= kMaxNameLength (the count fits one byte).
void AppendNaturalName(absl::string_view name, std::string* out);

// Appends `name` then 0x00: memcmp order is strcmp order (names hold no NUL).
void AppendLexicographicName(absl::string_view name, std::string* out);

// Longest output of AppendNaturalName / AppendLexicographicName for a name
// of at most kMaxNameLength bytes, terminator included. Natural: a run
// costs at most 2 bytes more than its digits and at most 127 runs fit in
// 254 bytes (runs are separated by a non-digit): 254 + 2 * 127 + 1 = 509.
inline constexpr size_t kMaxNaturalNameBytes = kMaxNameLength + 2 * 127 + 1;
inline constexpr size_t kMaxLexicographicNameBytes = kMaxNameLength + 1;

// The flag tie-break of samtools' name order (bam1_cmp_core) as one byte:
// READ2 << 3 | READ1 << 2 | SECONDARY << 1 | SUPPLEMENTARY. So neither <
// READ1 < READ2 < both, then primary < supplementary < secondary <
// secondary+supplementary. No other flag bit takes part.
uint8_t NameFlagRank(uint16_t flag);

// Appends the name part of the query-name orders: the name (natural or
// lexicographic), then the NameFlagRank byte. InvalidArgument for a name
// longer than kMaxNameLength.
absl::Status AppendNameKey(const bam1_t& record, bool natural, std::string* out);

// Longest output of AppendNameKey.
inline constexpr size_t NameKeyMaxBytes(bool natural) {
  return (natural ? kMaxNaturalNameBytes : kMaxLexicographicNameBytes) + 1;
}

// ---- Numbers -------------------------------------------------------------

// 4 bytes: v + 2^31 big-endian, so memcmp is signed order.
void AppendBiasedInt32(int32_t v, std::string* out);
// 8 bytes: v + 2^63 big-endian, so memcmp is signed order.
void AppendBiasedInt64(int64_t v, std::string* out);

// 8 bytes whose memcmp order is the numeric order of doubles, with
// -0.0 == +0.0: -0 becomes +0; a non-negative value gets its sign bit set,
// a negative one has all its bits inverted. REQUIRES: !std::isnan(v).
void AppendOrderedDouble(double v, std::string* out);

// ---- Aux tags ----------------------------------------------------------------

// The value of aux tag `tag` in `record` (a pointer to its type byte), or
// nullptr, exactly as htslib 1.23.1's bam_aux_get (which samtools 1.23.1
// calls) decides: tags are walked in order; an unknown type, a truncated
// value or an array running past the record ends the walk with nullptr
// (later tags are not found), and a matching Z/H value without its NUL is
// nullptr. Unlike htslib it logs nothing. A returned pointer's value lies
// inside the record: Z/H values are NUL-terminated, numbers complete.
const uint8_t* FindAux(const bam1_t& record, const char tag[2]);

// A Z or H value as a string (up to its NUL); REQUIRES: aux from FindAux and
// aux[0] is 'Z' or 'H'.
absl::string_view AuxString(const uint8_t* aux);

// ---- Template-coordinate positions (samtools bam.c) -----------------------

// 1-based unclipped start: pos + 1 minus the leading S/H lengths.
int64_t UnclippedStart(const bam1_t& record);
// 1-based unclipped end: bam_endpos (0-based exclusive end) plus the
// trailing S/H lengths.
int64_t UnclippedEnd(const bam1_t& record);
// The same for the mate, from its 0-based position and the MC tag's CIGAR
// text, parsed as samtools parses it (a number is optional before an
// operator; numbers saturate at INT64_MAX as strtol's; '*' or the end of
// the string stops; sums wrap instead of overflowing).
int64_t MateUnclippedStart(int64_t mpos, absl::string_view cigar);
int64_t MateUnclippedEnd(int64_t mpos, absl::string_view cigar);

// Appends the molecular identifier `mi` so that memcmp order is samtools'
// template_coordinate_key_compare_mid: a trailing "/x" (slash, one byte) is
// dropped; then bytes compare as `char` (signed on x86-64, where samtools'
// golden outputs come from: 0x80..0xFF sort before 0x01..0x7F), and a prefix
// sorts first. Each byte b becomes b - 0x7F if b >= 0x80 (1..0x80), else
// b + 0x80 (0x81..0xFF); a 0x00 ends it. REQUIRES: `mi` holds no NUL.
void AppendMolecularId(absl::string_view mi, std::string* out);

// ---- Encoders (constructed by MakeKeyEncoder) -----------------------------

// Appends the 16-byte coordinate key of `record` (keycodec.h); the
// coordinate encoder's Append, which the minimiser order uses for placed
// reads. InvalidArgument (nothing appended) as CheckCoordinate.
absl::Status AppendCoordinateKey(const bam1_t& record, uint64_t seq, std::string* key);

// -n (natural) or -N (lexicographic).
std::unique_ptr<KeyEncoder> MakeNameEncoder(bool natural);
// -t TAG, then coordinate (order.kind kCoordinate) or then the name order
// (kQueryName). REQUIRES: order.tag.size() == 2.
std::unique_ptr<KeyEncoder> MakeTagEncoder(const SortOrder& order);
// --template-coordinate; reads each @RG's LB from `header`.
absl::StatusOr<std::unique_ptr<KeyEncoder>> MakeTemplateCoordinateEncoder(const sam_hdr_t& header);
// -M. REQUIRES: 1 <= options.kmer <= 31.
std::unique_ptr<KeyEncoder> MakeMinimiserEncoder(const MinimiserOptions& options);

// ---- Minimisers (samtools bam_sort.c, minhash and reverse_complement) -----

// The k-mer of a read's sequence with the smallest hash, as samtools sort -M
// finds it. Each base's 2-bit code (A C G T = 0 1 2 3; any other base,
// N and IUPAC codes included, counts as A) shifts into a k-mer; its hash
// is the k-mer XOR samtools' constant 0xdead7878beef7878, masked to 2k
// bits. With try_reverse the reverse complement's k-mers are tried too and
// win only when strictly smaller; the first of equal hashes wins. With
// squash_homopolymers a base equal to the one before is skipped.
struct Minimiser {
  // UINT64_MAX when the sequence has fewer than k (accepted) bases.
  uint64_t hash = UINT64_MAX;
  // samtools' offset: the 0-based start of the k-mer in the read as it is
  // stored afterwards (reverse-complemented when found on the reverse
  // strand); 1 - k when no k-mer was found. With squashing it is the k-mer's
  // last base less k - 1, before the start when a run inside was skipped.
  int64_t offset = 0;
  bool reverse = false;  // Found on the reverse strand.
};
Minimiser FindMinimiser(const bam1_t& record, const MinimiserOptions& options);

// Reverse-complements SEQ, reverses QUAL and flips BAM_FREVERSE in place,
// as samtools' reverse_complement: each base becomes its complement
// (A<->T, C<->G, M<->K, R->Y, V<->B, H<->D; S, W, N stay; '=' becomes N,
// and Y stays Y, as samtools' table has it).
void ReverseComplement(bam1_t* record);

}  // namespace rocksort::keycodec::internal

#endif  // ROCKSORT_KEYCODEC_KEY_PARTS_INTERNAL_H_
