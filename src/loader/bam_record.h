// File: loader/bam_record.h  (internal to loader/ and its tests)
// -----------------------------------------------------------------------------
// The value format of the temporary DB: each value is one alignment record in
// its exact on-disk BAM encoding, block_size field included, byte for byte
// what htslib's bam_write1() would write for the same bam1_t. The emitter
// therefore only concatenates values into BGZF blocks, and the output is
// byte-identical to what `samtools sort` writes for the same record
// (samtools also reads with htslib and writes with bam_write1).
//
// What bam_write1 does that this reproduces:
//   * drops the extra NULs htslib pads the read name with (l_extranul);
//   * writes CIGARs of more than 65535 operations as the two-operation
//     placeholder "<l_qseq>S<ref_len>N" and appends the real CIGAR as a
//     CG:B,I tag at the end of the aux data (SAM spec 1.4.1; samtools#667);
//   * refuses read names over 254 characters and positions beyond int32.
//
// Thread-compatible: an EncodedRecord is written by one thread at a time.
#ifndef ROCKSORT_LOADER_BAM_RECORD_H_
#define ROCKSORT_LOADER_BAM_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "htslib/sam.h"

namespace rocksort::loader {

// The BAM encoding of one record as up to six slices, so that it can be
// handed to rocksdb::WriteBatch::Put(SliceParts) without an intermediate copy.
// The first slice points into `fixed`, the others into the bam1_t's data (or
// into the small buffers below); all are invalidated by the next Encode call
// or by any change to the bam1_t.
struct EncodedRecord {
  char fixed[36];          // block_size + the 32-byte fixed-length fields.
  char fake_cigar[8];      // Only for CIGARs of more than 65535 operations.
  char cg_tag_header[8];   // "CGBI" + count, likewise.
  absl::string_view parts[6];
  int num_parts = 0;
  size_t total_size = 0;   // Sum of the parts: 4 + block_size.

  // Appends the concatenated parts to *out (tests and diagnostics).
  void AppendTo(std::string* out) const;
};

// Encodes `b` as bam_write1 would. InvalidArgument (naming the read) when the
// record cannot be stored in BAM: read name longer than 254 characters,
// pos/mpos/isize outside int32, or a long CIGAR whose reference length does
// not fit a CIGAR operation.
absl::Status EncodeBamRecord(const bam1_t& b, EncodedRecord* out);

}  // namespace rocksort::loader

#endif  // ROCKSORT_LOADER_BAM_RECORD_H_
