// File: keycodec/name_key.cc
// -----------------------------------------------------------------------------
// The query-name keys: samtools sort -n (natural: digit runs compare by
// value, strnum_cmp) and -N (lexicographic: strcmp). samtools breaks a tie
// on the name by the READ1/READ2 and secondary/supplementary flag bits
// (bam1_cmp_core), then by input order. Layout (DO NOT CHANGE without
// docs/key_format.md and test/keycodec/name_key_test.cc):
//
//   name part    natural: non-digit bytes as is, each digit run as
//                0x30 <significant-digit count> <significant digits>;
//                lexicographic: the name bytes. Then 0x00.
//   1 byte       READ2 << 3 | READ1 << 2 | SECONDARY << 1 | SUPPLEMENTARY
//   8 bytes      seq, big-endian
//
// Longest key: 509 + 1 + 8 = 518 bytes (natural), 255 + 1 + 8 = 264 (-N).
#include "common/coding.h"
#include "keycodec/key_parts_internal.h"

namespace rocksort::keycodec::internal {
namespace {

class NameEncoder : public KeyEncoder {
 public:
  explicit NameEncoder(bool natural) : natural_(natural) {}

  absl::Status Append(const bam1_t& record, uint64_t seq, std::string* key) const override {
    if (absl::Status s = AppendNameKey(record, natural_, key); !s.ok()) return s;
    AppendBigEndian64(seq, key);
    return absl::OkStatus();
  }

  size_t max_key_bytes() const override { return NameKeyMaxBytes(natural_) + kSeqBytes; }

 private:
  const bool natural_;
};

}  // namespace

std::unique_ptr<KeyEncoder> MakeNameEncoder(bool natural) {
  return std::make_unique<NameEncoder>(natural);
}

}  // namespace rocksort::keycodec::internal
