// File: keycodec/tag_key.cc
// -----------------------------------------------------------------------------
// The -t TAG keys: records sort by the value of one aux tag, then by
// coordinate (-t alone) or by the query-name order (-t with -n/-N), then by
// input order, as samtools 1.23.1's bam1_cmp_by_tag. samtools reads the
// value with bam_aux_get (FindAux mirrors it: a malformed value reads as no
// tag) and compares by a normalised type letter first, so the value classes
// are ordered A < B < Z/H < numbers; within a class: A by unsigned byte, B
// arrays all equal (contents ignored), Z/H by strcmp, numbers (c C s S i I f
// d) by value, integers and floats together (every integer an aux field can
// hold, |v| < 2^32, is exact in a double) and -0.0 == 0.0.
//
// A NaN is not ordered by samtools' comparator (it answers "greater" both
// ways, so its output depends on input order and on -m). rocksort puts every
// NaN after every number, in a class of its own, NaNs equal to each other.
//
// Layout (DO NOT CHANGE without docs/key_format.md and
// test/keycodec/tag_key_test.cc):
//
//   1 byte    class: 0x00 no tag, 0x01 A, 0x02 B, 0x03 Z/H, 0x04 number,
//             0x05 NaN
//   value     A: the byte; B, no tag, NaN: nothing; Z/H: the string, 0x00
//             (no NUL inside an aux string); number: 8-byte ordered double
//   secondary coordinate: tid as u32 (unmapped -1 last), pos + 1 as u32,
//             strand byte (0 forward, 1 reverse) -- bam1_cmp_core's fields;
//             query name: the name key and flag byte of name_key.cc
//   8 bytes   seq, big-endian
#include <cmath>
#include <cstring>

#include "common/coding.h"
#include "keycodec/key_parts_internal.h"

namespace rocksort::keycodec::internal {
namespace {

// Class bytes: their order is samtools' order of normalised type letters
// ('A' < 'B' < 'H' < 'c' = 'f'), NaN last by rocksort's rule.
enum TagClass : char {
  kNoTag = 0x00,
  kChar = 0x01,
  kArray = 0x02,
  kString = 0x03,
  kNumber = 0x04,
  kNaN = 0x05,
};

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));  // Aux values are little-endian, as the host.
  return v;
}

// Appends the class byte and value of the tag at `aux` (from FindAux, so the
// value is complete and of a known type).
void AppendTagValue(const uint8_t* aux, std::string* out) {
  const uint8_t* p = aux + 1;
  double number;
  switch (aux[0]) {
    case 'A':
      out->push_back(kChar);
      out->push_back(static_cast<char>(p[0]));
      return;
    case 'B':
      out->push_back(kArray);
      return;
    case 'Z':
    case 'H': {
      out->push_back(kString);
      const absl::string_view s = AuxString(aux);
      out->append(s.data(), s.size());
      out->push_back('\0');
      return;
    }
    case 'c':
      number = Load<int8_t>(p);
      break;
    case 'C':
      number = Load<uint8_t>(p);
      break;
    case 's':
      number = Load<int16_t>(p);
      break;
    case 'S':
      number = Load<uint16_t>(p);
      break;
    case 'i':
      number = Load<int32_t>(p);
      break;
    case 'I':
      number = Load<uint32_t>(p);
      break;
    case 'f':
      number = Load<float>(p);
      break;
    default:  // 'd', the only other type FindAux returns.
      number = Load<double>(p);
      break;
  }
  if (std::isnan(number)) {
    out->push_back(kNaN);
    return;
  }
  out->push_back(kNumber);
  AppendOrderedDouble(number, out);
}

class TagEncoder : public KeyEncoder {
 public:
  explicit TagEncoder(const SortOrder& order)
      : tag_{order.tag[0], order.tag[1]},
        by_name_(order.kind == OrderKind::kQueryName),
        natural_(order.natural) {}

  absl::Status Append(const bam1_t& record, uint64_t seq, std::string* key) const override {
    const bam1_core_t& c = record.core;
    // Checked first so that a failing record appends nothing.
    if (!by_name_) {
      if (absl::Status s = CheckCoordinate(c.tid, c.pos); !s.ok()) return s;
    } else if (absl::Status s = CheckNameLength(QueryName(record)); !s.ok()) {
      return s;
    }
    const uint8_t* aux = FindAux(record, tag_);
    if (aux == nullptr) {
      key->push_back(kNoTag);
    } else {
      AppendTagValue(aux, key);
    }
    if (by_name_) {
      if (absl::Status s = AppendNameKey(record, natural_, key); !s.ok()) return s;
    } else {
      AppendBigEndian32(static_cast<uint32_t>(c.tid), key);  // -1 -> last.
      AppendBigEndian32(static_cast<uint32_t>(c.pos + 1), key);
      key->push_back((c.flag & BAM_FREVERSE) ? 1 : 0);
    }
    AppendBigEndian64(seq, key);
    return absl::OkStatus();
  }

  size_t max_key_bytes() const override {
    constexpr size_t kMaxValue = kBoundedTagStringBytes + 1;  // > 8 (number), 1 (A).
    constexpr size_t kCoordinateBytes = 4 + 4 + 1;
    return 1 + kMaxValue + (by_name_ ? NameKeyMaxBytes(natural_) : kCoordinateBytes) + kSeqBytes;
  }

 private:
  const char tag_[2];
  const bool by_name_;
  const bool natural_;
};

}  // namespace

std::unique_ptr<KeyEncoder> MakeTagEncoder(const SortOrder& order) {
  return std::make_unique<TagEncoder>(order);
}

}  // namespace rocksort::keycodec::internal
