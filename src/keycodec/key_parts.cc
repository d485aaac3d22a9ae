// File: keycodec/key_parts.cc
// -----------------------------------------------------------------------------
// The shared key building blocks declared in key_parts_internal.h: name keys,
// order-preserving numbers, the bam_aux_get mirror and samtools' unclipped
// positions. Each function states the samtools/htslib behaviour it
// reproduces; the encoders (name_key.cc, tag_key.cc,
// template_coordinate_key.cc) only arrange these parts.
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/aux_type.h"
#include "common/coding.h"
#include "keycodec/key_parts_internal.h"

namespace rocksort::keycodec::internal {
namespace {

bool IsDigit(unsigned char c) { return c >= '0' && c <= '9'; }

// The marker that stands for a digit run in a natural name key: '0' itself,
// the smallest digit, so that it orders against non-digit bytes as samtools
// orders a run's first digit against them (every non-digit byte is below
// '0' or above '9').
constexpr char kDigitRunMarker = 0x30;

// htslib's aux_type2size: the fixed size of a value type, or the type byte
// itself for Z, H and B (which htslib then switches on), 0 for unknown.
int AuxTypeSize(uint8_t type) {
  if (type == 'Z' || type == 'H' || type == 'B') return type;
  return static_cast<int>(FixedAuxSize(static_cast<char>(type)));
}

// htslib 1.23.1's skip_aux: the end of the value whose type byte is at `s`,
// or nullptr when the value is malformed. A Z/H value without a NUL runs to
// `end` (the caller decides); an array's byte count is computed in 32-bit
// unsigned arithmetic, element size times count, as htslib computes it (for
// Z/H/B element types htslib's "size" is the type letter, kept here).
const uint8_t* SkipAux(const uint8_t* s, const uint8_t* end) {
  if (s >= end) return end;
  int size = AuxTypeSize(*s);
  ++s;
  switch (size) {
    case 'Z':
    case 'H': {
      const void* nul = std::memchr(s, 0, static_cast<size_t>(end - s));
      return nul != nullptr ? static_cast<const uint8_t*>(nul) + 1 : end;
    }
    case 'B': {
      if (end - s < 5) return nullptr;
      size = AuxTypeSize(*s);
      ++s;
      const uint32_t n = GetLittleEndian32(reinterpret_cast<const char*>(s));
      s += 4;
      const uint32_t bytes = static_cast<uint32_t>(size) * n;
      if (size == 0 || end - s < static_cast<int64_t>(bytes)) return nullptr;
      return s + bytes;
    }
    case 0:
      return nullptr;
    default:
      if (end - s < size) return nullptr;
      return s + size;
  }
}

// Digits of a CIGAR length as strtol(..., 10) reads them: saturating at
// INT64_MAX (LONG_MAX on the LP64 hosts rocksort supports). Advances *i past
// every digit.
int64_t ParseCigarNumber(absl::string_view text, size_t* i) {
  uint64_t v = 0;
  bool saturated = false;
  for (; *i < text.size() && IsDigit(text[*i]); ++*i) {
    const uint64_t digit = static_cast<uint64_t>(text[*i] - '0');
    if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10) {
      saturated = true;
    } else {
      v = v * 10 + digit;
    }
  }
  return saturated ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(v);
}

// Two's-complement addition without undefined behaviour (samtools' int64
// sums can overflow only on absurd MC strings; we wrap as the hardware would).
int64_t WrappingAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t WrappingSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}

}  // namespace

absl::string_view QueryName(const bam1_t& record) {
  const char* name = bam_get_qname(&record);
  return absl::string_view(name, strnlen(name, record.core.l_qname));
}

absl::Status CheckNameLength(absl::string_view name) {
  if (name.size() > kMaxNameLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("read name has ", name.size(), " bytes, more than BAM's ", kMaxNameLength));
  }
  return absl::OkStatus();
}

void AppendNaturalName(absl::string_view name, std::string* out) {
  size_t i = 0;
  while (i < name.size()) {
    if (!IsDigit(name[i])) {
      out->push_back(name[i]);
      ++i;
      continue;
    }
    size_t run_end = i;
    while (run_end < name.size() && IsDigit(name[run_end])) ++run_end;
    size_t significant = i;
    while (significant < run_end && name[significant] == '0') ++significant;
    out->push_back(kDigitRunMarker);
    // <= 254 by the REQUIRES: one byte.
    out->push_back(static_cast<char>(run_end - significant));
    out->append(name.data() + significant, run_end - significant);
    i = run_end;
  }
  out->push_back('\0');
}

void AppendLexicographicName(absl::string_view name, std::string* out) {
  out->append(name.data(), name.size());
  out->push_back('\0');
}

uint8_t NameFlagRank(uint16_t flag) {
  return static_cast<uint8_t>(((flag & BAM_FREAD2) ? 8 : 0) | ((flag & BAM_FREAD1) ? 4 : 0) |
                              ((flag & BAM_FSECONDARY) ? 2 : 0) |
                              ((flag & BAM_FSUPPLEMENTARY) ? 1 : 0));
}

absl::Status AppendNameKey(const bam1_t& record, bool natural, std::string* out) {
  const absl::string_view name = QueryName(record);
  if (absl::Status s = CheckNameLength(name); !s.ok()) return s;
  if (natural) {
    AppendNaturalName(name, out);
  } else {
    AppendLexicographicName(name, out);
  }
  out->push_back(static_cast<char>(NameFlagRank(record.core.flag)));
  return absl::OkStatus();
}

void AppendBiasedInt32(int32_t v, std::string* out) {
  AppendBigEndian32(static_cast<uint32_t>(v) ^ 0x80000000u, out);
}

void AppendBiasedInt64(int64_t v, std::string* out) {
  AppendBigEndian64(static_cast<uint64_t>(v) ^ (uint64_t{1} << 63), out);
}

void AppendOrderedDouble(double v, std::string* out) {
  if (v == 0) v = 0.0;  // -0.0 == 0.0 in samtools' comparison: one encoding.
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  constexpr uint64_t kSign = uint64_t{1} << 63;
  bits = (bits & kSign) ? ~bits : (bits | kSign);
  AppendBigEndian64(bits, out);
}

const uint8_t* FindAux(const bam1_t& record, const char tag[2]) {
  const uint8_t* s = bam_get_aux(&record);
  const uint8_t* const end = record.data + record.l_data;
  // bam_aux_first: fewer than 3 bytes left means no (further) tag.
  if (end - s <= 2) return nullptr;
  s += 2;
  while (true) {
    if (s[-2] == static_cast<uint8_t>(tag[0]) && s[-1] == static_cast<uint8_t>(tag[1])) {
      const uint8_t* e = SkipAux(s, end);
      if (e == nullptr) return nullptr;
      if ((*s == 'Z' || *s == 'H') && e[-1] != '\0') return nullptr;
      return s;
    }
    const uint8_t* next = SkipAux(s, end);
    if (next == nullptr || end - next <= 2) return nullptr;
    s = next + 2;
  }
}

absl::string_view AuxString(const uint8_t* aux) {
  return absl::string_view(reinterpret_cast<const char*>(aux + 1));
}

int64_t UnclippedStart(const bam1_t& record) {
  const uint32_t* cigar = bam_get_cigar(&record);
  int64_t clipped = 0;
  for (uint32_t i = 0; i < record.core.n_cigar; ++i) {
    const int op = bam_cigar_op(cigar[i]);
    if (op != BAM_CSOFT_CLIP && op != BAM_CHARD_CLIP) break;
    clipped += bam_cigar_oplen(cigar[i]);
  }
  return record.core.pos - clipped + 1;
}

int64_t UnclippedEnd(const bam1_t& record) {
  const uint32_t* cigar = bam_get_cigar(&record);
  int64_t clipped = 0;
  for (int64_t i = static_cast<int64_t>(record.core.n_cigar) - 1; i >= 0; --i) {
    const int op = bam_cigar_op(cigar[i]);
    if (op != BAM_CSOFT_CLIP && op != BAM_CHARD_CLIP) break;
    clipped += bam_cigar_oplen(cigar[i]);
  }
  return bam_endpos(&record) + clipped;
}

int64_t MateUnclippedStart(int64_t mpos, absl::string_view cigar) {
  int64_t clipped = 0;
  size_t i = 0;
  while (i < cigar.size() && cigar[i] != '*') {
    const int64_t num = IsDigit(cigar[i]) ? ParseCigarNumber(cigar, &i) : 1;
    if (i >= cigar.size() || (cigar[i] != 'S' && cigar[i] != 'H')) break;
    clipped = WrappingAdd(clipped, num);
    ++i;
  }
  return WrappingAdd(WrappingSub(mpos, clipped), 1);
}

int64_t MateUnclippedEnd(int64_t mpos, absl::string_view cigar) {
  int64_t refpos = 0;
  bool leading_clips = true;  // Clips before the first reference op do not count.
  size_t i = 0;
  while (i < cigar.size() && cigar[i] != '*') {
    const int64_t num = IsDigit(cigar[i]) ? ParseCigarNumber(cigar, &i) : 1;
    // A number at the very end has no operator. samtools then steps past
    // the string's NUL and reads on into the record (an over-read); we stop.
    if (i >= cigar.size()) break;
    switch (cigar[i]) {
      case 'M':
      case 'D':
      case 'N':
      case '=':
      case 'X':
        refpos = WrappingAdd(refpos, num);
        leading_clips = false;
        break;
      case 'S':
      case 'H':
        if (!leading_clips) refpos = WrappingAdd(refpos, num);
        break;
      default:
        break;
    }
    ++i;
  }
  return WrappingAdd(mpos, refpos);
}

void AppendMolecularId(absl::string_view mi, std::string* out) {
  if (mi.size() >= 2 && mi[mi.size() - 2] == '/') mi.remove_suffix(2);
  for (const char c : mi) {
    const uint8_t b = static_cast<uint8_t>(c);
    // Signed-char rank: -128..-1 -> 1..128, 1..127 -> 129..255.
    out->push_back(static_cast<char>(b >= 0x80 ? b - 0x7F : b + 0x80));
  }
  out->push_back('\0');
}

}  // namespace rocksort::keycodec::internal
