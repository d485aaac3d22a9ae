// File: keycodec/template_coordinate_key.cc
// -----------------------------------------------------------------------------
// The --template-coordinate key: samtools 1.23.1's template_coordinate_key
// and bam1_cmp_template_coordinate as bytes, so that both ends of a template
// sort together at the template's earlier unclipped 5' end.
//
// Per record: end 1 is the record's own unclipped 5' end (tid, 1-based
// position: the unclipped end if reverse, else the unclipped start, strand);
// unmapped: (INT32_MAX, HTS_POS_MAX, forward). End 2 is the mate's, from
// mtid, mpos and the MC tag's CIGAR, when the record is paired and its mate
// mapped; otherwise the same sentinels. When end 1 is after end 2 (by tid,
// then position, then: equal and end 1 reverse), the ends swap and the record
// is the template's "upper" one. samtools then orders by tid1, tid2, pos1,
// pos2 (all signed), strand1 and strand2 (reverse first), library (LB of the
// record's @RG, strcmp), molecular identifier (MI without a trailing "/x"),
// name (strcmp), lower before upper, then input order.
//
// Layout (DO NOT CHANGE without docs/key_format.md and
// test/keycodec/template_coordinate_key_test.cc):
//
//   4 bytes   tid1 + 2^31, big-endian (signed order)
//   4 bytes   tid2 + 2^31
//   8 bytes   pos1 + 2^63, big-endian (positions can be <= 0)
//   8 bytes   pos2 + 2^63
//   1 byte    (strand1 forward) << 1 | (strand2 forward): reverse first
//   L + 1     library bytes, 0x00 (header values hold no NUL: strcmp order)
//   M + 1     MI as AppendMolecularId writes it, 0x00-terminated
//   N + 1     read name, 0x00 (strcmp order)
//   1 byte    0 lower, 1 upper
//   8 bytes   seq, big-endian
//
// Every string ends in 0x00, which no string byte equals, so a string that
// is a prefix of another sorts first and never compares against the next
// field. Errors, as samtools (which then exits 1): a paired record with a
// mapped mate and no MC tag (bam_aux_get finds none: missing or malformed),
// an MC tag that is not a string (Z or H), an MI tag that is not one.
//
// tid -1 with a mapped flag (a malformed record: RNAME or RNEXT '*') sorts
// before every reference here; samtools' int subtraction overflows there and
// its order depends on the input. Such records are not refused.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/coding.h"
#include "keycodec/key_parts_internal.h"

namespace rocksort::keycodec::internal {
namespace {

// The defaults of an unmapped end (samtools: INT32_MAX, HTS_POS_MAX).
constexpr int32_t kNoTid = INT32_MAX;
constexpr int64_t kNoPos = HTS_POS_MAX;

class TemplateCoordinateEncoder : public KeyEncoder {
 public:
  // `library_by_read_group`: @RG ID -> LB, only read groups with an LB.
  explicit TemplateCoordinateEncoder(
      absl::flat_hash_map<std::string, std::string> library_by_read_group)
      : library_by_read_group_(std::move(library_by_read_group)) {
    for (const auto& [id, library] : library_by_read_group_) {
      max_library_bytes_ = std::max(max_library_bytes_, library.size());
    }
  }

  absl::Status Append(const bam1_t& record, uint64_t seq, std::string* key) const override {
    const bam1_core_t& c = record.core;
    const absl::string_view name = QueryName(record);
    if (absl::Status s = CheckNameLength(name); !s.ok()) return s;

    absl::string_view library;  // Empty: no RG, an RG without LB or not Z.
    if (const uint8_t* rg = FindAux(record, "RG"); rg != nullptr && rg[0] == 'Z') {
      if (auto it = library_by_read_group_.find(AuxString(rg));
          it != library_by_read_group_.end()) {
        library = it->second;
      }
    }

    int32_t tid1 = kNoTid, tid2 = kNoTid;
    int64_t pos1 = kNoPos, pos2 = kNoPos;
    bool neg1 = false, neg2 = false;
    if (!(c.flag & BAM_FUNMAP)) {
      tid1 = c.tid;
      neg1 = (c.flag & BAM_FREVERSE) != 0;
      pos1 = neg1 ? UnclippedEnd(record) : UnclippedStart(record);
    }
    if ((c.flag & BAM_FPAIRED) && !(c.flag & BAM_FMUNMAP)) {
      const uint8_t* mc = FindAux(record, "MC");
      if (mc == nullptr) {
        return absl::InvalidArgumentError(
            "no MC tag on a paired read with a mapped mate (template-coordinate "
            "needs the mate's CIGAR): run samtools fixmate on the input first");
      }
      if (mc[0] != 'Z' && mc[0] != 'H') {
        return absl::InvalidArgumentError(
            "MC tag is not a string: use the MC tag samtools fixmate writes");
      }
      const absl::string_view mate_cigar = AuxString(mc);
      tid2 = c.mtid;
      neg2 = (c.flag & BAM_FMREVERSE) != 0;
      pos2 = neg2 ? MateUnclippedEnd(c.mpos, mate_cigar) : MateUnclippedStart(c.mpos, mate_cigar);
    }
    absl::string_view mi;  // Empty when there is no (readable) MI tag.
    if (const uint8_t* aux = FindAux(record, "MI"); aux != nullptr) {
      if (aux[0] != 'Z' && aux[0] != 'H') {
        return absl::InvalidArgumentError("MI tag is not a string");
      }
      mi = AuxString(aux);
    }

    const bool lower =
        tid1 < tid2 || (tid1 == tid2 && pos1 < pos2) || (tid1 == tid2 && pos1 == pos2 && !neg1);
    if (!lower) {
      std::swap(tid1, tid2);
      std::swap(pos1, pos2);
      std::swap(neg1, neg2);
    }

    AppendBiasedInt32(tid1, key);
    AppendBiasedInt32(tid2, key);
    AppendBiasedInt64(pos1, key);
    AppendBiasedInt64(pos2, key);
    key->push_back(static_cast<char>((neg1 ? 0 : 2) | (neg2 ? 0 : 1)));
    key->append(library.data(), library.size());
    key->push_back('\0');
    AppendMolecularId(mi, key);
    AppendLexicographicName(name, key);
    key->push_back(lower ? 0 : 1);
    AppendBigEndian64(seq, key);
    return absl::OkStatus();
  }

  size_t max_key_bytes() const override {
    return 4 + 4 + 8 + 8 + 1 + (max_library_bytes_ + 1) + (kBoundedTagStringBytes + 1) +
           kMaxLexicographicNameBytes + 1 + kSeqBytes;
  }

 private:
  const absl::flat_hash_map<std::string, std::string> library_by_read_group_;
  size_t max_library_bytes_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<KeyEncoder>> MakeTemplateCoordinateEncoder(const sam_hdr_t& header) {
  // htslib's header accessors take a non-const pointer because they parse the
  // text lazily; they do not change the header's content.
  sam_hdr_t* h = const_cast<sam_hdr_t*>(&header);
  absl::flat_hash_map<std::string, std::string> library_by_read_group;
  const int n = sam_hdr_count_lines(h, "RG");
  if (n < 0) return absl::InvalidArgumentError("cannot parse the @RG lines of the header");
  kstring_t lb = KS_INITIALIZE;
  for (int i = 0; i < n; ++i) {
    const char* id = sam_hdr_line_name(h, "RG", i);
    if (id == nullptr) {
      ks_free(&lb);
      return absl::InvalidArgumentError(absl::StrCat("@RG line ", i + 1, " has no ID"));
    }
    const int found = sam_hdr_find_tag_pos(h, "RG", i, "LB", &lb);
    if (found < -1) {
      ks_free(&lb);
      return absl::InternalError("htslib failed to read an @RG LB tag");
    }
    // As samtools' lookup_libraries: read groups without LB are skipped, and
    // the first line with an ID wins.
    if (found < 0 || lb.s == nullptr) continue;
    library_by_read_group.try_emplace(id, std::string(lb.s, lb.l));
  }
  ks_free(&lb);
  return std::make_unique<TemplateCoordinateEncoder>(std::move(library_by_read_group));
}

}  // namespace rocksort::keycodec::internal
