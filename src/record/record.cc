#include "record/record.h"

#include <climits>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/aux_type.h"
#include "common/coding.h"

namespace rocksort::record {
namespace {

// The bytes of the aux field starting at aux[at] (tag, type, value), or 0
// when it runs past the end or its type is unknown.
size_t AuxFieldSize(absl::string_view aux, size_t at) {
  if (at + 3 > aux.size()) return 0;
  const char type = aux[at + 2];
  size_t value = 0;
  if (type == 'Z' || type == 'H') {
    const size_t nul = aux.find('\0', at + 3);
    if (nul == absl::string_view::npos) return 0;
    value = nul + 1 - (at + 3);
  } else if (type == 'B') {
    if (at + 8 > aux.size()) return 0;
    const size_t element = FixedAuxSize(aux[at + 3]);
    if (element == 0 || element == 8) return 0;
    value = 5 + element * GetLittleEndian32(aux.data() + at + 4);
  } else {
    value = FixedAuxSize(type);
    if (value == 0) return 0;
  }
  return at + 3 + value <= aux.size() ? 3 + value : 0;
}

// Where the field `tag` starts in `aux` (npos if absent or malformed).
size_t FindAuxField(absl::string_view aux, const char tag[2]) {
  for (size_t at = 0; at < aux.size();) {
    const size_t size = AuxFieldSize(aux, at);
    if (size == 0) return absl::string_view::npos;
    if (aux[at] == tag[0] && aux[at + 1] == tag[1]) return at;
    at += size;
  }
  return absl::string_view::npos;
}

}  // namespace

void EncodedRecord::AppendTo(std::string* out) const {
  for (int i = 0; i < num_parts; ++i) out->append(parts[i].data(), parts[i].size());
}

absl::Status EncodeRecord(const bam1_t& b, EncodedRecord* out) {
  const bam1_core_t& c = b.core;
  const char* data = reinterpret_cast<const char*>(b.data);
  const uint32_t l_qname = c.l_qname - c.l_extranul;
  if (l_qname > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("read name \"", bam_get_qname(&b), "\" is longer than 254 characters"));
  }
  if (c.pos > INT_MAX || c.mpos > INT_MAX || c.isize < INT_MIN || c.isize > INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("read \"", bam_get_qname(&b), "\": position data too large for BAM"));
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
  PutLittleEndian32(uint32_t{c.flag} << 16 | (long_cigar ? 2u : (c.n_cigar & 0xffff)), f + 16);
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
      return absl::InvalidArgumentError(absl::StrCat("read \"", bam_get_qname(&b), "\" has ",
                                                     c.n_cigar, " CIGAR operations over ", ref_len,
                                                     " reference bases, which BAM cannot store"));
    }
    const size_t cigar_bytes = size_t{c.n_cigar} * 4;
    const size_t cigar_end = after_qname + cigar_bytes;
    PutLittleEndian32(static_cast<uint32_t>(c.l_qseq) << 4 | BAM_CSOFT_CLIP, out->fake_cigar);
    PutLittleEndian32(static_cast<uint32_t>(ref_len) << 4 | BAM_CREF_SKIP, out->fake_cigar + 4);
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

uint32_t RecordView::U32(size_t at) const { return GetLittleEndian32(bytes_.data() + at); }

absl::string_view RecordView::qname() const {
  const size_t n = NameBytes();
  return bytes_.substr(kFixedBytes, n > 0 ? n - 1 : 0);
}

size_t RecordView::AuxOffset() const {
  const uint32_t l_seq = U32(20);
  return kFixedBytes + NameBytes() + 4 * size_t{n_cigar()} + (size_t{l_seq} + 1) / 2 + l_seq;
}

int64_t RecordView::end() const {
  int64_t rlen = 0;
  if ((flag() & BAM_FUNMAP) == 0) {
    for (uint32_t i = 0; i < n_cigar(); ++i) {
      const uint32_t op = cigar(i);
      if (bam_cigar_type(bam_cigar_op(op)) & 2) rlen += bam_cigar_oplen(op);
    }
  }
  return pos() + (rlen == 0 ? 1 : rlen);
}

absl::string_view RecordView::FindAux(const char tag[2]) const {
  const size_t offset = AuxOffset();
  if (offset > bytes_.size()) return {};
  const absl::string_view aux = bytes_.substr(offset);
  const size_t at = FindAuxField(aux, tag);
  if (at == absl::string_view::npos) return {};
  return aux.substr(at + 2, AuxFieldSize(aux, at) - 2);
}

absl::Status DecodeRecord(absl::string_view bytes, bam1_t* b) {
  auto corrupt = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("stored record is corrupt: ", what));
  };
  if (bytes.size() < kFixedBytes || GetLittleEndian32(bytes.data()) + 4 != bytes.size()) {
    return corrupt("its length does not match its block_size");
  }
  const RecordView view(bytes);
  const uint32_t l_qname = static_cast<uint8_t>(bytes[12]);
  const uint32_t stored_n_cigar = view.n_cigar();
  const uint32_t l_seq = GetLittleEndian32(bytes.data() + 20);
  const size_t cigar_at = kFixedBytes + l_qname;
  const size_t seq_at = cigar_at + 4 * size_t{stored_n_cigar};
  const size_t aux_at = seq_at + (size_t{l_seq} + 1) / 2 + l_seq;
  if (l_qname == 0 || aux_at > bytes.size() || bytes[cigar_at - 1] != '\0') {
    return corrupt("its fields run past its end");
  }
  absl::string_view aux = bytes.substr(aux_at);

  // A long CIGAR (EncodeRecord's placeholder "<l_seq>S<rlen>N" plus CG:B,I),
  // recognised as htslib's bam_read1 recognises it.
  absl::string_view real_cigar;
  size_t cg_at = absl::string_view::npos;
  if (stored_n_cigar > 0 && view.tid() >= 0 && view.pos() >= 0 &&
      view.cigar(0) == (l_seq << BAM_CIGAR_SHIFT | BAM_CSOFT_CLIP)) {
    cg_at = FindAuxField(aux, "CG");
    if (cg_at != absl::string_view::npos) {
      const uint32_t cg_len =
          aux[cg_at + 2] == 'B' && (aux[cg_at + 3] == 'I' || aux[cg_at + 3] == 'i')
              ? GetLittleEndian32(aux.data() + cg_at + 4)
              : 0;
      if (cg_len >= stored_n_cigar && cg_len < (1u << 29)) {
        real_cigar = aux.substr(cg_at + 8, 4 * size_t{cg_len});
      } else {
        cg_at = absl::string_view::npos;
      }
    }
  }
  const uint32_t l_extranul = l_qname % 4 == 0 ? 0 : 4 - l_qname % 4;
  const size_t cigar_bytes = real_cigar.empty() ? 4 * size_t{stored_n_cigar} : real_cigar.size();
  const size_t cg_bytes = cg_at == absl::string_view::npos ? 0 : AuxFieldSize(aux, cg_at);
  const size_t l_data =
      l_qname + l_extranul + cigar_bytes + (aux_at - seq_at) + aux.size() - cg_bytes;
  if (l_data > INT_MAX) return corrupt("it is too large");
  if (b->m_data < l_data) {
    auto* data = static_cast<uint8_t*>(std::realloc(b->data, l_data));
    if (data == nullptr) return absl::ResourceExhaustedError("out of memory decoding a record");
    b->data = data;
    b->m_data = static_cast<uint32_t>(l_data);
  }
  char* out = reinterpret_cast<char*>(b->data);
  std::memcpy(out, bytes.data() + kFixedBytes, l_qname);
  std::memset(out + l_qname, 0, l_extranul);
  out += l_qname + l_extranul;
  if (real_cigar.empty()) {
    std::memcpy(out, bytes.data() + cigar_at, cigar_bytes);
  } else {
    std::memcpy(out, real_cigar.data(), cigar_bytes);
  }
  out += cigar_bytes;
  std::memcpy(out, bytes.data() + seq_at, aux_at - seq_at);
  out += aux_at - seq_at;
  if (cg_at == absl::string_view::npos) {
    std::memcpy(out, aux.data(), aux.size());
  } else {
    std::memcpy(out, aux.data(), cg_at);
    std::memcpy(out + cg_at, aux.data() + cg_at + cg_bytes, aux.size() - cg_at - cg_bytes);
  }
  b->l_data = static_cast<int>(l_data);

  bam1_core_t& c = b->core;
  c.tid = view.tid();
  c.pos = view.pos();
  const uint32_t bin_mq_nl = GetLittleEndian32(bytes.data() + 12);
  c.bin = static_cast<uint16_t>(bin_mq_nl >> 16);
  c.qual = static_cast<uint8_t>(bin_mq_nl >> 8);
  c.l_extranul = static_cast<uint8_t>(l_extranul);
  c.l_qname = static_cast<uint16_t>(l_qname + l_extranul);
  c.flag = view.flag();
  c.n_cigar = static_cast<uint32_t>(cigar_bytes / 4);
  c.l_qseq = static_cast<int32_t>(l_seq);
  c.mtid = view.mtid();
  c.mpos = view.mpos();
  c.isize = static_cast<int32_t>(GetLittleEndian32(bytes.data() + 32));
  return absl::OkStatus();
}

}  // namespace rocksort::record
