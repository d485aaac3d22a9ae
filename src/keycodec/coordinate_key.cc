// File: keycodec/coordinate_key.cc
// -----------------------------------------------------------------------------
// The coordinate key (16 bytes, layout in keycodec.h) and MakeKeyEncoder,
// which picks the encoder of a SortOrder; the other orders' encoders live in
// name_key.cc, tag_key.cc, template_coordinate_key.cc and minimiser_key.cc.
#include "keycodec/keycodec.h"

#include "absl/strings/str_cat.h"
#include "common/coding.h"
#include "keycodec/key_parts_internal.h"

namespace rocksort::keycodec {

absl::Status CheckCoordinate(int32_t tid, int64_t pos) {
  if (tid < -1) {
    return absl::InvalidArgumentError(absl::StrCat("reference id ", tid, " is negative"));
  }
  if (pos < -1 || pos > kMaxPosition) {
    return absl::InvalidArgumentError(
        absl::StrCat("position ", pos, " is outside the BAM range -1..", kMaxPosition));
  }
  return absl::OkStatus();
}

void EncodeCoordinateKey(const CoordinateKey& key, char* out) {
  // tid -1 becomes 0xFFFFFFFF: unmapped reads sort after every reference.
  PutBigEndian32(static_cast<uint32_t>(key.tid), out);
  // pos -1 becomes 0; pos + 1 <= 2^31 by the REQUIRES.
  PutBigEndian32(static_cast<uint32_t>(key.pos + 1), out + 4);
  PutBigEndian64((key.reverse ? uint64_t{1} << 63 : 0) | key.seq, out + 8);
}

absl::StatusOr<CoordinateKey> DecodeCoordinateKey(absl::string_view bytes) {
  if (bytes.size() != kCoordinateKeySize) {
    return absl::DataLossError(
        absl::StrCat("coordinate key has ", bytes.size(), " bytes, expected ", kCoordinateKeySize));
  }
  CoordinateKey key;
  key.tid = static_cast<int32_t>(GetBigEndian32(bytes.data()));
  key.pos = static_cast<int64_t>(GetBigEndian32(bytes.data() + 4)) - 1;
  const uint64_t strand_seq = GetBigEndian64(bytes.data() + 8);
  key.reverse = (strand_seq >> 63) != 0;
  key.seq = strand_seq & kMaxSequence;
  return key;
}

bool SamtoolsCoordinateLess(const CoordinateKey& a, const CoordinateKey& b) {
  // Mirrors bam1_cmp_core: tid as unsigned, then pos + 1, then strand.
  const uint64_t ta = static_cast<uint32_t>(a.tid);
  const uint64_t tb = static_cast<uint32_t>(b.tid);
  if (ta != tb) return ta < tb;
  const uint64_t pa = static_cast<uint64_t>(a.pos + 1);
  const uint64_t pb = static_cast<uint64_t>(b.pos + 1);
  if (pa != pb) return pa < pb;
  if (a.reverse != b.reverse) return !a.reverse;
  // samtools' merge breaks ties by input order.
  return a.seq < b.seq;
}

namespace internal {

absl::Status AppendCoordinateKey(const bam1_t& record, uint64_t seq, std::string* key) {
  const bam1_core_t& c = record.core;
  if (absl::Status s = CheckCoordinate(c.tid, c.pos); !s.ok()) return s;
  char bytes[kCoordinateKeySize];
  EncodeCoordinateKey({c.tid, c.pos, (c.flag & BAM_FREVERSE) != 0, seq}, bytes);
  key->append(bytes, sizeof(bytes));
  return absl::OkStatus();
}

}  // namespace internal

namespace {

class CoordinateEncoder : public KeyEncoder {
 public:
  absl::Status Append(const bam1_t& record, uint64_t seq, std::string* key) const override {
    return internal::AppendCoordinateKey(record, seq, key);
  }
  size_t max_key_bytes() const override { return kCoordinateKeySize; }
};

}  // namespace

absl::StatusOr<std::unique_ptr<KeyEncoder>> MakeKeyEncoder(const SortOrder& order,
                                                           const sam_hdr_t& header) {
  if (!order.tag.empty()) {
    if (order.tag.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("sort tag \"", order.tag, "\" does not have two characters"));
    }
    if (order.kind == OrderKind::kTemplateCoordinate) {
      // SortOrder::FromFlags turns -t with --template-coordinate into
      // tag-then-coordinate, as samtools does.
      return absl::InvalidArgumentError(
          "a sort tag is followed by coordinate or query-name order, not template-coordinate");
    }
    return internal::MakeTagEncoder(order);
  }
  switch (order.kind) {
    case OrderKind::kCoordinate:
      return std::make_unique<CoordinateEncoder>();
    case OrderKind::kQueryName:
      return internal::MakeNameEncoder(order.natural);
    case OrderKind::kTemplateCoordinate:
      return internal::MakeTemplateCoordinateEncoder(header);
    case OrderKind::kMinimiser:
      if (order.minimiser.kmer < 1 || order.minimiser.kmer > 31) {
        return absl::InvalidArgumentError(
            absl::StrCat("minimiser k-mer size ", order.minimiser.kmer, " is outside 1..31"));
      }
      return internal::MakeMinimiserEncoder(order.minimiser);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown sort order ", static_cast<int>(order.kind)));
}

}  // namespace rocksort::keycodec
