#include "loader/bam_record.h"

#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace rocksort::loader {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the BAM value format is written with host-order stores");

void PutLittleEndian32(uint32_t v, char* out) { std::memcpy(out, &v, 4); }

}  // namespace

void EncodedRecord::AppendTo(std::string* out) const {
  for (int i = 0; i < num_parts; ++i) out->append(parts[i].data(), parts[i].size());
}

absl::Status EncodeBamRecord(const bam1_t& b, EncodedRecord* out) {
  const bam1_core_t& c = b.core;
  const char* data = reinterpret_cast<const char*>(b.data);
  const uint32_t l_qname = c.l_qname - c.l_extranul;
  if (l_qname > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("read name \"", bam_get_qname(&b),
                     "\" is longer than 254 characters"));
  }
  if (c.pos > INT_MAX || c.mpos > INT_MAX || c.isize < INT_MIN ||
      c.isize > INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("read \"", bam_get_qname(&b),
                     "\": position data too large for BAM"));
  }
  const bool long_cigar = c.n_cigar > 0xffff;
  uint32_t block_len = static_cast<uint32_t>(b.l_data) - c.l_extranul + 32;
  // The placeholder CIGAR (8 bytes) plus "CGBI" and its count (8 bytes).
  if (long_cigar) block_len += 16;

  char* f = out->fixed;
  PutLittleEndian32(block_len, f);
  PutLittleEndian32(static_cast<uint32_t>(c.tid), f + 4);
  PutLittleEndian32(static_cast<uint32_t>(c.pos), f + 8);
  PutLittleEndian32(uint32_t{c.bin} << 16 | uint32_t{c.qual} << 8 | l_qname, f + 12);
  PutLittleEndian32(uint32_t{c.flag} << 16 | (long_cigar ? 2u : (c.n_cigar & 0xffff)),
                    f + 16);
  PutLittleEndian32(static_cast<uint32_t>(c.l_qseq), f + 20);
  PutLittleEndian32(static_cast<uint32_t>(c.mtid), f + 24);
  PutLittleEndian32(static_cast<uint32_t>(c.mpos), f + 28);
  PutLittleEndian32(static_cast<uint32_t>(c.isize), f + 32);

  out->parts[0] = absl::string_view(out->fixed, sizeof(out->fixed));
  out->parts[1] = absl::string_view(data, l_qname);
  const size_t after_qname = c.l_qname;  // Offset of the CIGAR in b.data.
  if (!long_cigar) {
    out->parts[2] = absl::string_view(data + after_qname, b.l_data - after_qname);
    out->num_parts = 3;
  } else {
    const hts_pos_t ref_len = bam_cigar2rlen(c.n_cigar, bam_get_cigar(&b));
    if (ref_len >= (hts_pos_t{1} << 28)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "read \"", bam_get_qname(&b), "\" has ", c.n_cigar,
          " CIGAR operations over ", ref_len,
          " reference bases, which BAM cannot store"));
    }
    const size_t cigar_bytes = size_t{c.n_cigar} * 4;
    const size_t cigar_end = after_qname + cigar_bytes;
    PutLittleEndian32(static_cast<uint32_t>(c.l_qseq) << 4 | BAM_CSOFT_CLIP,
                      out->fake_cigar);
    PutLittleEndian32(static_cast<uint32_t>(ref_len) << 4 | BAM_CREF_SKIP,
                      out->fake_cigar + 4);
    std::memcpy(out->cg_tag_header, "CGBI", 4);
    PutLittleEndian32(c.n_cigar, out->cg_tag_header + 4);
    out->parts[2] = absl::string_view(out->fake_cigar, 8);
    out->parts[3] = absl::string_view(data + cigar_end, b.l_data - cigar_end);
    out->parts[4] = absl::string_view(out->cg_tag_header, 8);
    out->parts[5] = absl::string_view(data + after_qname, cigar_bytes);
    out->num_parts = 6;
  }
  out->total_size = 0;
  for (int i = 0; i < out->num_parts; ++i) out->total_size += out->parts[i].size();
  return absl::OkStatus();
}

}  // namespace rocksort::loader
