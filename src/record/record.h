// File: record/record.h
// -----------------------------------------------------------------------------
// The stored record: the one owner of the BAM record layout in rocksort.
//
// Each record is stored (the temporary DB's value) in its exact on-disk BAM
// encoding, block_size field included, byte for byte what htslib's
// bam_write1() writes for the same bam1_t. The BAM sink therefore only
// concatenates stored records into BGZF blocks, and the output is
// byte-identical to what `samtools sort` writes for the same record
// (samtools also reads with htslib and writes with bam_write1).
//
// What bam_write1 does that EncodeRecord reproduces:
//   * drops the extra NULs htslib pads the read name with (l_extranul);
//   * writes CIGARs of more than 65535 operations as the two-operation
//     placeholder "<l_qseq>S<ref_len>N" and appends the real CIGAR as a
//     CG:B,I tag at the end of the aux data (SAM spec 1.4.1; samtools#667);
//   * refuses read names over 254 characters and positions beyond int32.
// DecodeRecord undoes the CIGAR rewrite, as htslib's bam_read1 does, for
// sinks that write through htslib (SAM, CRAM). RecordView reads fields in
// place, for the index and for diagnostics.
//
// Layout (SAM/BAM spec 4.2; little-endian):
//   0 block_size  4 refID  8 pos  12 l_read_name(u8) mapq(u8) bin(u16)
//   16 n_cigar_op(u16) flag(u16)  20 l_seq  24 next_refID  28 next_pos
//   32 tlen  36 read_name (NUL-terminated), cigar (u32 x n), seq (4-bit
//   packed), qual, aux fields.
//
// Thread-compatible value types.
#ifndef ROCKSORT_RECORD_RECORD_H_
#define ROCKSORT_RECORD_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "htslib/sam.h"

namespace rocksort::record {

// Bytes before the read name: block_size plus the 32-byte fixed part.
inline constexpr size_t kFixedBytes = 36;

// The BAM encoding of one record as up to six slices, so that it can be
// copied into a write batch without an intermediate buffer. The first slice
// points into `fixed`, the others into the bam1_t's data (or into the
// small buffers below); all are invalidated by the next EncodeRecord call
// or by any change to the bam1_t.
struct EncodedRecord {
  char fixed[kFixedBytes];  // block_size + the 32-byte fixed-length fields.
  char fake_cigar[8];       // Only for CIGARs of more than 65535 operations.
  char cg_tag_header[8];    // "CGBI" + count, likewise.
  absl::string_view parts[6];
  int num_parts = 0;
  size_t total_size = 0;  // Sum of the parts: 4 + block_size.

  // Appends the concatenated parts to *out.
  void AppendTo(std::string* out) const;
};

// Encodes `b` as bam_write1 would. InvalidArgument (naming the read) when the
// record cannot be stored in BAM: read name longer than 254 characters,
// pos/mpos/isize outside int32, or a long CIGAR whose reference length does
// not fit a CIGAR operation.
absl::Status EncodeRecord(const bam1_t& b, EncodedRecord* out);

// A read-only view of a stored record. Does not own the bytes, which must
// outlive it. REQUIRES: `bytes` is a record EncodeRecord produced (the
// accessors do not validate it).
class RecordView {
 public:
  explicit RecordView(absl::string_view bytes) : bytes_(bytes) {}

  absl::string_view bytes() const { return bytes_; }
  int32_t tid() const { return static_cast<int32_t>(U32(4)); }
  int32_t pos() const { return static_cast<int32_t>(U32(8)); }
  uint16_t flag() const { return static_cast<uint16_t>(U32(16) >> 16); }
  uint32_t n_cigar() const { return U32(16) & 0xffff; }
  int32_t mtid() const { return static_cast<int32_t>(U32(24)); }
  int32_t mpos() const { return static_cast<int32_t>(U32(28)); }
  // The read name, without its NUL.
  absl::string_view qname() const;
  // The i-th CIGAR operation as stored (for a long CIGAR: the placeholder).
  uint32_t cigar(uint32_t i) const { return U32(kFixedBytes + NameBytes() + 4 * i); }
  // One past the last reference base covered, as htslib's bam_endpos: pos +
  // the reference length of the CIGAR, or pos + 1 when the record is
  // unmapped or its CIGAR covers no reference base.
  int64_t end() const;
  // The aux field `tag` as htslib's bam_aux_get returns it: the type byte
  // followed by the value; empty when absent or the aux data is malformed.
  absl::string_view FindAux(const char tag[2]) const;

 private:
  uint32_t U32(size_t at) const;
  size_t NameBytes() const { return static_cast<uint8_t>(bytes_[12]); }
  // Offset of the aux data.
  size_t AuxOffset() const;

  absl::string_view bytes_;
};

// Fills `b` from a stored record, restoring a CIGAR moved to a CG:B,I tag
// (and removing the tag), so that htslib writers see the record bam_read1
// would have returned. DataLoss when the bytes are not a well-formed record.
absl::Status DecodeRecord(absl::string_view bytes, bam1_t* b);

// Receives keyed records: the store's writer implements it, the loader fills
// it. Copies what it needs before Add returns.
class KeyedRecordSink {
 public:
  virtual ~KeyedRecordSink() = default;
  virtual absl::Status Add(absl::string_view key, const EncodedRecord& record) = 0;
};

}  // namespace rocksort::record

#endif  // ROCKSORT_RECORD_RECORD_H_
