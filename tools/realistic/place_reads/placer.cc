#include "placer.h"

#include <htslib/hts.h>
#include <htslib/sam.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace rocksort {
namespace place_reads {

namespace {

// Reference length of a CIGAR given as text ("97S53M"); 0 if it has none.
int64_t CigarTextRefLength(std::string_view cigar) {
  int64_t total = 0;
  int64_t n = 0;
  for (char c : cigar) {
    if (c >= '0' && c <= '9') {
      n = n * 10 + (c - '0');
      continue;
    }
    if (c == 'M' || c == 'D' || c == 'N' || c == '=' || c == 'X') total += n;
    n = 0;
  }
  return total;
}

// The complement of each 4-bit BAM base code, as a letter (seq_nt16_str is
// "=ACMGRSVTWYHKDBN").
constexpr char kComplementOfNt16[] = "=TGKCYSBAWRDMHVN";

bool ParseInt64(std::string_view text, int64_t* out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

absl::Status Placer::Run() {
  size_t n = 0;        // records of the current template in pool_[0..n)
  uint64_t first = 0;  // input records before the current template
  for (;;) {
    if (pool_.size() == n) pool_.push_back(NewRecord());
    const int r = sam_read1(in_, in_hdr_, pool_[n].get());
    if (r < -1) {
      return absl::DataLossError(
          absl::StrFormat("%s: record %d: cannot parse (truncated or corrupt input)", opts_.input,
                          stats_.records_in + 1));
    }
    if (r == -1) break;
    ++stats_.records_in;
    if (n > 0 && std::strcmp(bam_get_qname(pool_[0].get()), bam_get_qname(pool_[n].get())) != 0) {
      PLACE_RETURN_IF_ERROR(ProcessTemplate(n, first));
      std::swap(pool_[0], pool_[n]);
      first += n;
      n = 0;
    }
    ++n;
  }
  if (n > 0) PLACE_RETURN_IF_ERROR(ProcessTemplate(n, first));
  return absl::OkStatus();
}

absl::Status Placer::ProcessTemplate(size_t n, uint64_t first) {
  ++serial_;
  first_record_number_ = first;
  const std::string qname = bam_get_qname(pool_[0].get());

  // Primary records per segment; a repeat means the name was reused or the
  // records of two templates are interleaved.
  int primary[2] = {-1, -1};
  bool paired = false;
  bool all_unmapped = true;
  bool any_unmapped = false;
  for (size_t i = 0; i < n; ++i) {
    const bam1_t* b = pool_[i].get();
    if (b->core.flag & BAM_FPAIRED) paired = true;
    if (b->core.flag & BAM_FUNMAP) {
      any_unmapped = true;
    } else {
      all_unmapped = false;
    }
    if (!IsPrimary(b)) continue;
    int& slot = primary[Segment(b)];
    if (slot >= 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: record %d (read \"%s\"): a second primary record for the "
                          "same read; the records of a template must be consecutive and "
                          "names unique (as bwa mem writes them)",
                          opts_.input, first_record_number_ + i + 1, qname));
    }
    slot = static_cast<int>(i);
  }
  if (paired && (primary[0] < 0 || primary[1] < 0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: record %d (read \"%s\"): the mate's primary record is not next "
                        "to it; the records of a template must be consecutive (as bwa mem "
                        "writes them)",
                        opts_.input, first_record_number_ + 1, qname));
  }

  ++stats_.templates;
  if (paired) ++stats_.paired_templates;
  const std::string& name = namer_.Next();

  const bool aligner_unmapped = paired && all_unmapped;
  if (aligner_unmapped) ++stats_.aligner_unmapped_pairs;
  bool make_unmapped = false;
  if (paired && !aligner_unmapped && opts_.unmapped_frac > 0) {
    // Shortfall of unmapped pairs against the target, this template
    // included; see kUnmappedControlWindow.
    const double unmapped_so_far =
        static_cast<double>(stats_.aligner_unmapped_pairs + stats_.made_unmapped_pairs);
    const double shortfall =
        opts_.unmapped_frac * static_cast<double>(stats_.templates) - unmapped_so_far;
    const double p = opts_.unmapped_frac + shortfall / kUnmappedControlWindow;
    make_unmapped = unmapped_rng_.Uniform() < p;
  }
  if (make_unmapped) {
    ++stats_.made_unmapped_pairs;
    return WriteUnmappedPair(primary, name);
  }
  if (!aligner_unmapped && any_unmapped) ++stats_.one_mate_unmapped;

  PLACE_RETURN_IF_ERROR(PlaceTemplate(n));

  bool has_xa = false;
  bool has_sa = false;
  for (size_t i = 0; i < n; ++i) {
    bam1_t* b = pool_[i].get();
    if (bam_set_qname(b, name.c_str()) < 0) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("%s: record %d (read \"%s\"): out of memory renaming it", opts_.input,
                          first_record_number_ + i + 1, qname));
    }
    PLACE_RETURN_IF_ERROR(RewriteTag(b, "SA", i, qname, &has_sa));
    PLACE_RETURN_IF_ERROR(RewriteTag(b, "XA", i, qname, &has_xa));
    if (b->core.flag & BAM_FSUPPLEMENTARY) ++stats_.supplementary;
    if (b->core.flag & BAM_FSECONDARY) ++stats_.secondary;
    PLACE_RETURN_IF_ERROR(Write(b));
  }
  if (has_xa) ++stats_.templates_with_xa;
  if (has_sa) ++stats_.templates_with_sa;
  return absl::OkStatus();
}

absl::Status Placer::PlaceTemplate(size_t n) {
  // Spans per input contig, in order of first appearance.
  contigs_.clear();
  auto extend = [&](int tid, int64_t begin, int64_t end) {
    Span& s = span_[tid];
    if (s.stamp != serial_) {
      s.stamp = serial_;
      s.begin = begin;
      s.end = end;
      contigs_.push_back(tid);
    } else {
      s.begin = std::min(s.begin, begin);
      s.end = std::max(s.end, end);
    }
  };
  for (size_t i = 0; i < n; ++i) {
    const bam1_t* b = pool_[i].get();
    if (b->core.tid >= n_in_contigs_ || b->core.mtid >= n_in_contigs_) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: record %d (read \"%s\"): reference id out of range", opts_.input,
                          first_record_number_ + i + 1, bam_get_qname(b)));
    }
    if (b->core.tid >= 0 && b->core.pos >= 0) {
      extend(b->core.tid, b->core.pos, std::max(bam_endpos(b), b->core.pos + 1));
    }
    if (b->core.mtid >= 0 && b->core.mpos >= 0) {
      extend(b->core.mtid, b->core.mpos, b->core.mpos + 1);
    }
  }
  if (contigs_.size() > 1) ++stats_.multi_contig;
  bool used[kNumHumanContigs] = {};
  for (int tid : contigs_) {
    const Span& s = span_[tid];
    int new_tid = 0;
    int64_t start = 0;
    if (!genome_.Place(placement_rng_, s.end - s.begin, used, &new_tid, &start)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: record %d (read \"%s\"): the template spans %d bases of %s, "
                          "more than fits on a GRCh38 contig",
                          opts_.input, first_record_number_ + 1, bam_get_qname(pool_[0].get()),
                          s.end - s.begin, sam_hdr_tid2name(in_hdr_, tid)));
    }
    used[new_tid] = true;
    Translation& t = map_[tid];
    t.stamp = serial_;
    t.tid = new_tid;
    t.offset = start - s.begin;
  }
  for (size_t i = 0; i < n; ++i) {
    bam1_core_t& c = pool_[i]->core;
    if (c.tid >= 0) {
      const Translation& t = map_[c.tid];
      c.tid = t.tid;
      if (c.pos >= 0) c.pos += t.offset;
    }
    if (c.mtid >= 0) {
      const Translation& t = map_[c.mtid];
      c.mtid = t.tid;
      if (c.mpos >= 0) c.mpos += t.offset;
    }
    if (c.tid >= 0 && c.pos >= 0) {
      c.bin = hts_reg2bin(c.pos, bam_endpos(pool_[i].get()), 14, 5);
    }
  }
  return absl::OkStatus();
}

absl::Status Placer::TranslationFor(int tid, int64_t pos, int64_t ref_length,
                                    const Translation** out) {
  Translation& t = map_[tid];
  if (t.stamp != serial_) {
    bool avoid[kNumHumanContigs] = {};
    int new_tid = 0;
    int64_t start = 0;
    if (!genome_.Place(placement_rng_, std::max<int64_t>(ref_length, 1), avoid, &new_tid, &start)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("an alignment of %d bases does not fit on any "
                          "GRCh38 contig",
                          ref_length));
    }
    t.stamp = serial_;
    t.tid = new_tid;
    t.offset = start - pos;
  }
  *out = &t;
  return absl::OkStatus();
}

absl::Status Placer::RewriteTag(bam1_t* b, const char tag[2], size_t i, const std::string& qname,
                                bool* seen) {
  const uint8_t* data = bam_aux_get(b, tag);
  if (data == nullptr) return absl::OkStatus();
  const bool is_sa = tag[0] == 'S';
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: record %d (read \"%s\"): %s tag: %s",
                                                      opts_.input, first_record_number_ + i + 1,
                                                      qname, tag, why));
  };
  if (*data != 'Z') return fail("not of type Z");
  *seen = true;
  if (is_sa) {
    ++stats_.records_with_sa;
  } else {
    ++stats_.records_with_xa;
  }
  const std::string_view value(reinterpret_cast<const char*>(data + 1));
  tag_out_.clear();
  Split(value, ';', &entries_);
  for (std::string_view entry : entries_) {
    if (entry.empty()) continue;
    const std::string entry_text(entry);
    Split(entry, ',', &fields_);
    if (fields_.size() != (is_sa ? 6u : 4u)) {
      return fail("malformed entry \"" + entry_text + "\"");
    }
    const std::string rname(fields_[0]);
    const int in_tid = sam_hdr_name2tid(in_hdr_, rname.c_str());
    if (in_tid < 0) return fail("unknown reference \"" + rname + "\"");
    std::string_view pos_text = fields_[1];
    char sign = 0;
    if (!is_sa) {
      if (pos_text.empty() || (pos_text[0] != '+' && pos_text[0] != '-')) {
        return fail("malformed entry \"" + entry_text + "\"");
      }
      sign = pos_text[0];
      pos_text.remove_prefix(1);
    }
    int64_t pos1 = 0;
    if (!ParseInt64(pos_text, &pos1) || pos1 < 1) {
      return fail("bad position in \"" + entry_text + "\"");
    }
    const std::string_view cigar = fields_[is_sa ? 3 : 2];
    const int64_t ref_length = CigarTextRefLength(cigar);
    const Translation* t = nullptr;
    absl::Status s = TranslationFor(in_tid, pos1 - 1, ref_length, &t);
    if (!s.ok()) return fail(std::string(s.message()));
    // Clamp so the alignment lies inside its new contig.
    const int64_t length = HumanGenome::Length(t->tid);
    const int64_t last_start = std::max<int64_t>(1, length - ref_length + 1);
    const int64_t new_pos1 = std::clamp<int64_t>(pos1 + t->offset, 1, last_start);
    tag_out_ += kHumanNames[t->tid];
    tag_out_ += ',';
    if (sign != 0) tag_out_ += sign;
    tag_out_ += std::to_string(new_pos1);
    for (size_t f = 2; f < fields_.size(); ++f) {
      tag_out_ += ',';
      tag_out_ += fields_[f];
    }
    tag_out_ += ';';
  }
  // bam_aux_update_str keeps the tag where it is.
  if (bam_aux_update_str(b, tag, static_cast<int>(tag_out_.size()), tag_out_.c_str()) < 0) {
    return fail("cannot update it (out of memory?)");
  }
  return absl::OkStatus();
}

absl::Status Placer::WriteUnmappedPair(const int primary[2], const std::string& name) {
  for (int seg = 0; seg < 2; ++seg) {
    const bam1_t* src = pool_[primary[seg]].get();
    const int len = src->core.l_qseq;
    const bool reverse = (src->core.flag & BAM_FREVERSE) != 0;
    seq_.resize(len);
    qual_.resize(len);
    const uint8_t* s = bam_get_seq(src);
    const uint8_t* q = bam_get_qual(src);
    for (int k = 0; k < len; ++k) {
      const int from = reverse ? len - 1 - k : k;
      const int code = bam_seqi(s, from);
      seq_[k] = reverse ? kComplementOfNt16[code] : seq_nt16_str[code];
      qual_[k] = static_cast<char>(q[from]);
    }
    const uint8_t* rg = bam_aux_get(src, "RG");
    std::string rg_value;
    if (rg != nullptr && *rg == 'Z') rg_value = reinterpret_cast<const char*>(rg + 1);
    bam1_t* b = made_[seg].get();
    const uint16_t flag =
        BAM_FPAIRED | BAM_FUNMAP | BAM_FMUNMAP | (seg == 0 ? BAM_FREAD1 : BAM_FREAD2);
    const bool have_qual = len > 0 && q[0] != 0xff;
    if (bam_set1(b, name.size(), name.c_str(), flag, -1, -1, 0, 0, nullptr, -1, -1, 0, len,
                 seq_.data(), have_qual ? qual_.data() : nullptr, 16 + rg_value.size()) < 0) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "%s: record %d (read \"%s\"): cannot build the unmapped record", opts_.input,
          first_record_number_ + primary[seg] + 1, bam_get_qname(src)));
    }
    const uint8_t zero = 0;
    if (bam_aux_append(b, "AS", 'C', 1, &zero) < 0 || bam_aux_append(b, "XS", 'C', 1, &zero) < 0 ||
        (rg != nullptr && bam_aux_append(b, "RG", 'Z', static_cast<int>(rg_value.size() + 1),
                                         reinterpret_cast<const uint8_t*>(rg_value.c_str())) < 0)) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("%s: record %d (read \"%s\"): cannot add tags", opts_.input,
                          first_record_number_ + primary[seg] + 1, bam_get_qname(src)));
    }
    PLACE_RETURN_IF_ERROR(Write(b));
  }
  return absl::OkStatus();
}

absl::Status Placer::Write(const bam1_t* b) {
  errno = 0;
  if (sam_write1(out_, out_hdr_, b) < 0) {
    return absl::DataLossError(absl::StrFormat(
        "%s: cannot write record %d (read \"%s\"): %s", opts_.output, stats_.records_out + 1,
        bam_get_qname(b), errno != 0 ? std::strerror(errno) : "write error"));
  }
  ++stats_.records_out;
  // As in a BAM file: block_size (4 bytes) + 32-byte core + variable data
  // without the NULs htslib adds in memory to align the CIGAR.
  stats_.bytes_uncompressed += 4 + 32 + static_cast<uint64_t>(b->l_data - b->core.l_extranul);
  return absl::OkStatus();
}

}  // namespace place_reads
}  // namespace rocksort
