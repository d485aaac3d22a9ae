#include "record/record.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "htslib/bgzf.h"
#include "test_util.h"

namespace rocksort::record {
namespace {

using ::rocksort::test_util::ScratchDir;

struct BamDeleter {
  void operator()(bam1_t* b) const { bam_destroy1(b); }
};
using BamPtr = std::unique_ptr<bam1_t, BamDeleter>;

BamPtr MakeRecord(const std::string& name, uint16_t flag, int32_t tid, int64_t pos,
                  const std::vector<uint32_t>& cigar, const std::string& seq,
                  const std::string& aux = "") {
  BamPtr b(bam_init1());
  std::string qual(seq.size(), 30);
  const int r =
      bam_set1(b.get(), name.size(), name.c_str(), flag, tid, pos, 60, cigar.size(), cigar.data(),
               -1, -1, 0, seq.size(), seq.c_str(), qual.c_str(), aux.size());
  EXPECT_GE(r, 0);
  if (!aux.empty()) {
    std::memcpy(b->data + b->l_data, aux.data(), aux.size());
    b->l_data += static_cast<int>(aux.size());
  }
  return b;
}

// What htslib's bam_write1 writes for `b`: the reference for our encoder.
std::string HtslibEncoding(const bam1_t& b) {
  ScratchDir dir;
  const std::string path = dir.File("rec.bgzf");
  BGZF* out = bgzf_open(path.c_str(), "wu");
  EXPECT_GE(bam_write1(out, &b), 0);
  EXPECT_EQ(bgzf_close(out), 0);
  BGZF* in = bgzf_open(path.c_str(), "r");
  std::string bytes;
  char buf[1 << 16];
  ssize_t n;
  while ((n = bgzf_read(in, buf, sizeof(buf))) > 0) bytes.append(buf, n);
  bgzf_close(in);
  return bytes;
}

std::string OurEncoding(const bam1_t& b) {
  EncodedRecord encoded;
  absl::Status s = EncodeRecord(b, &encoded);
  EXPECT_TRUE(s.ok()) << s;
  std::string out;
  encoded.AppendTo(&out);
  EXPECT_EQ(out.size(), encoded.total_size);
  return out;
}

TEST(EncodeRecord, EncodingEqualsHtslibForPlainRecord) {
  // A 5-character name makes htslib pad it with extra NULs in memory.
  BamPtr b = MakeRecord("read1", 0x10, 0, 100, {bam_cigar_gen(4, BAM_CMATCH)}, "ACGT",
                        std::string("NMC\x02", 4));
  ASSERT_GT(b->core.l_extranul, 0);
  EXPECT_EQ(OurEncoding(*b), HtslibEncoding(*b));
}

TEST(EncodeRecord, EncodingEqualsHtslibForUnmappedRecord) {
  BamPtr b = MakeRecord("unmapped/1", 0x4, -1, -1, {}, "NNNNACGT");
  EXPECT_EQ(OurEncoding(*b), HtslibEncoding(*b));
}

TEST(EncodeRecord, RecordsLargerThan64KiBAreEncodedWhole) {
  const std::string seq(100000, 'A');
  BamPtr b = MakeRecord("big", 0, 2, 5, {bam_cigar_gen(100000, BAM_CMATCH)}, seq,
                        "XZZ" + std::string(70000, 'x') + std::string(1, '\0'));
  const std::string ours = OurEncoding(*b);
  EXPECT_GT(ours.size(), 200000u);
  EXPECT_EQ(ours, HtslibEncoding(*b));
}

TEST(EncodeRecord, CigarOver65535OpsMovesToCgTag) {
  std::vector<uint32_t> cigar;
  std::string seq;
  for (int i = 0; i < 40000; ++i) {
    cigar.push_back(bam_cigar_gen(1, BAM_CMATCH));
    cigar.push_back(bam_cigar_gen(1, BAM_CINS));
    seq += "AC";
  }
  BamPtr b = MakeRecord("longcigar", 0, 0, 1000, cigar, seq, std::string("NMC\x07", 4));
  ASSERT_EQ(b->core.n_cigar, 80000u);
  const std::string ours = OurEncoding(*b);
  EXPECT_EQ(ours, HtslibEncoding(*b));
  EXPECT_NE(ours.find("CGBI"), std::string::npos);
}

TEST(EncodeRecord, RejectsReadNameLongerThan254) {
  BamPtr b = MakeRecord("x", 4, -1, -1, {}, "A");
  // bam_set1 refuses long names, so lengthen the stored name directly.
  b->core.l_qname = 300;
  b->core.l_extranul = 0;
  EncodedRecord encoded;
  EXPECT_EQ(EncodeRecord(*b, &encoded).code(), absl::StatusCode::kInvalidArgument);
}

// Encode, then decode: the bam1_t htslib would have read back.
void ExpectRoundTrip(const bam1_t& original) {
  EncodedRecord encoded;
  ASSERT_TRUE(EncodeRecord(original, &encoded).ok());
  std::string bytes;
  encoded.AppendTo(&bytes);
  BamPtr decoded(bam_init1());
  ASSERT_TRUE(DecodeRecord(bytes, decoded.get()).ok());
  EXPECT_EQ(std::memcmp(&decoded->core, &original.core, sizeof(bam1_core_t)), 0);
  ASSERT_EQ(decoded->l_data, original.l_data);
  EXPECT_EQ(std::memcmp(decoded->data, original.data, original.l_data), 0);
  // And it encodes to the same bytes again.
  EXPECT_EQ(OurEncoding(*decoded), bytes);
}

TEST(DecodeRecord, RestoresWhatEncodeStored) {
  ExpectRoundTrip(*MakeRecord("read1", 0x10, 0, 100, {bam_cigar_gen(4, BAM_CMATCH)}, "ACGT",
                              std::string("NMC\x02", 4)));
  ExpectRoundTrip(*MakeRecord("unmapped/1", 0x4, -1, -1, {}, "NNNNACGT"));
  ExpectRoundTrip(*MakeRecord("abcd", 0, 1, 7, {bam_cigar_gen(3, BAM_CMATCH)}, "ACG",
                              std::string("XZZhello\0ZZA!", 13)));
}

TEST(DecodeRecord, MovesALongCigarBackFromTheCgTag) {
  std::vector<uint32_t> cigar;
  std::string seq;
  for (int i = 0; i < 40000; ++i) {
    cigar.push_back(bam_cigar_gen(1, BAM_CMATCH));
    cigar.push_back(bam_cigar_gen(1, BAM_CINS));
    seq += "AC";
  }
  BamPtr b = MakeRecord("longcigar", 0, 0, 1000, cigar, seq, std::string("NMC\x07", 4));
  EncodedRecord encoded;
  ASSERT_TRUE(EncodeRecord(*b, &encoded).ok());
  std::string bytes;
  encoded.AppendTo(&bytes);
  BamPtr decoded(bam_init1());
  ASSERT_TRUE(DecodeRecord(bytes, decoded.get()).ok());
  ASSERT_EQ(decoded->core.n_cigar, 80000u);
  EXPECT_EQ(std::memcmp(bam_get_cigar(decoded.get()), cigar.data(), cigar.size() * 4), 0);
  EXPECT_EQ(bam_aux_get(decoded.get(), "CG"), nullptr);
  EXPECT_NE(bam_aux_get(decoded.get(), "NM"), nullptr);
  EXPECT_EQ(decoded->l_data, b->l_data);
}

TEST(DecodeRecord, RejectsTruncatedBytes) {
  BamPtr b = MakeRecord("r", 0, 0, 1, {bam_cigar_gen(1, BAM_CMATCH)}, "A");
  std::string bytes = OurEncoding(*b);
  BamPtr decoded(bam_init1());
  EXPECT_EQ(DecodeRecord(bytes.substr(0, bytes.size() - 1), decoded.get()).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeRecord("", decoded.get()).code(), absl::StatusCode::kDataLoss);
}

TEST(RecordView, ReadsFieldsInPlace) {
  BamPtr b = MakeRecord("read7", BAM_FREVERSE | BAM_FPAIRED, 3, 100,
                        {bam_cigar_gen(5, BAM_CSOFT_CLIP), bam_cigar_gen(10, BAM_CMATCH),
                         bam_cigar_gen(2, BAM_CDEL), bam_cigar_gen(5, BAM_CMATCH)},
                        std::string(20, 'A'), std::string("NMi\x03\0\0\0MCZ10M\0", 14));
  const std::string bytes = OurEncoding(*b);
  const RecordView view(bytes);
  EXPECT_EQ(view.tid(), 3);
  EXPECT_EQ(view.pos(), 100);
  EXPECT_EQ(view.flag(), BAM_FREVERSE | BAM_FPAIRED);
  EXPECT_EQ(view.qname(), "read7");
  EXPECT_EQ(view.n_cigar(), 4u);
  EXPECT_EQ(view.end(), bam_endpos(b.get()));
  EXPECT_EQ(view.FindAux("MC"), absl::string_view("Z10M\0", 5));
  EXPECT_EQ(view.FindAux("NM").substr(0, 1), "i");
  EXPECT_TRUE(view.FindAux("XX").empty());
}

TEST(RecordView, UnmappedRecordEndsOneAfterItsPosition) {
  BamPtr b = MakeRecord("u", BAM_FUNMAP, 2, 50, {bam_cigar_gen(4, BAM_CMATCH)}, "ACGT");
  const std::string bytes = OurEncoding(*b);
  EXPECT_EQ(RecordView(bytes).end(), 51);
}

}  // namespace
}  // namespace rocksort::record
