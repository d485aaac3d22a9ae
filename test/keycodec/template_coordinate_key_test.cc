// File: test/keycodec/template_coordinate_key_test.cc
// -----------------------------------------------------------------------------
// The --template-coordinate key against a reference comparator written here
// from the rules of samtools 1.23.1 (template_coordinate_key and
// bam1_cmp_template_coordinate), on random records built to collide: clips
// on both sides, both strands, unmapped reads and mates, mates on another
// reference, MI with and without "/x" (and bytes >= 0x80), read groups with
// and without LB; plus the MC/MI errors, the mate-CIGAR parser and the bound.
#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "keycodec/key_parts_internal.h"
#include "keycodec/keycodec.h"
#include "keycodec/reference_orders.h"
#include "keycodec/test_records.h"

namespace rocksort::keycodec {
namespace {

using test_util::AuxInt;
using test_util::AuxZ;
using test_util::BamPtr;
using test_util::KeyOf;
using test_util::MakeRecord;
using test_util::ParseCigar;
using test_util::RecordSpec;
using test_util::Sign;

constexpr char kHeader[] =
    "@HD\tVN:1.6\n@SQ\tSN:chr1\tLN:1000\n@SQ\tSN:chr2\tLN:1000\n"
    "@RG\tID:g1\tLB:libB\n@RG\tID:g2\tLB:libA\n@RG\tID:g3\tSM:s\n"
    "@RG\tID:g4\tLB:libA2\n";
const std::map<std::string, std::string> kLibraries = {
    {"g1", "libB"}, {"g2", "libA"}, {"g4", "libA2"}};

std::unique_ptr<KeyEncoder> Encoder(const char* header_text = kHeader) {
  absl::StatusOr<std::unique_ptr<KeyEncoder>> e = MakeKeyEncoder(
      SortOrder{OrderKind::kTemplateCoordinate, true, ""}, *test_util::ParseHeader(header_text));
  EXPECT_TRUE(e.ok()) << e.status();
  return std::move(*e);
}

// The reference key, from the rules.
struct RefKey {
  int64_t tid1 = INT32_MAX, tid2 = INT32_MAX;
  int64_t pos1 = HTS_POS_MAX, pos2 = HTS_POS_MAX;
  bool neg1 = false, neg2 = false;
  std::string library, mi, name;
  bool upper = false;
  uint64_t seq = 0;
};

bool IsClip(uint32_t op) { return op == BAM_CSOFT_CLIP || op == BAM_CHARD_CLIP; }
bool ConsumesReference(uint32_t op) {
  return op == BAM_CMATCH || op == BAM_CDEL || op == BAM_CREF_SKIP || op == BAM_CEQUAL ||
         op == BAM_CDIFF;
}

// 1-based 5' end of an alignment at 0-based `pos` with `cigar`, counting
// clips: the first base before the leading clips (forward), or the last base
// after the trailing clips (reverse). A record's own alignment spans at least
// one base (bam_endpos) and its trailing clips are those after its last
// non-clip operation; the mate's, read from MC, spans what MC says, and its
// clips count once a reference-consuming operation was seen (samtools'
// unclipped_other_end). The two agree on every well-formed CIGAR.
int64_t FivePrime(int64_t pos, const std::string& cigar, bool reverse, bool own) {
  const std::vector<uint32_t> ops = cigar == "*" ? std::vector<uint32_t>() : ParseCigar(cigar);
  if (!reverse) {
    int64_t clipped = 0;
    for (uint32_t op : ops) {
      if (!IsClip(bam_cigar_op(op))) break;
      clipped += bam_cigar_oplen(op);
    }
    return pos + 1 - clipped;
  }
  int64_t span = 0, clips = 0;
  for (uint32_t op : ops) {
    if (ConsumesReference(bam_cigar_op(op))) span += bam_cigar_oplen(op);
    if (IsClip(bam_cigar_op(op)) && span > 0) clips += bam_cigar_oplen(op);
  }
  if (own) {
    clips = 0;
    for (auto it = ops.rbegin(); it != ops.rend() && IsClip(bam_cigar_op(*it)); ++it) {
      clips += bam_cigar_oplen(*it);
    }
    span = std::max<int64_t>(span, 1);
  }
  return pos + span + clips;
}

std::string StripMiSuffix(std::string mi) {
  if (mi.size() >= 2 && mi[mi.size() - 2] == '/') mi.resize(mi.size() - 2);
  return mi;
}

// template_coordinate_key_compare_mid: bytes as (signed, x86-64) char, a
// prefix first.
int CompareMi(const std::string& a, const std::string& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const signed char ca = static_cast<signed char>(a[i]);
    const signed char cb = static_cast<signed char>(b[i]);
    if (ca != cb) return ca < cb ? -1 : 1;
  }
  return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}

int Compare(const RefKey& a, const RefKey& b) {
  if (a.tid1 != b.tid1) return a.tid1 < b.tid1 ? -1 : 1;
  if (a.tid2 != b.tid2) return a.tid2 < b.tid2 ? -1 : 1;
  if (a.pos1 != b.pos1) return a.pos1 < b.pos1 ? -1 : 1;
  if (a.pos2 != b.pos2) return a.pos2 < b.pos2 ? -1 : 1;
  if (a.neg1 != b.neg1) return a.neg1 ? -1 : 1;  // Reverse first.
  if (a.neg2 != b.neg2) return a.neg2 ? -1 : 1;
  if (int c = Sign(std::strcmp(a.library.c_str(), b.library.c_str())); c != 0) return c;
  if (int c = CompareMi(StripMiSuffix(a.mi), StripMiSuffix(b.mi)); c != 0) return c;
  if (int c = Sign(std::strcmp(a.name.c_str(), b.name.c_str())); c != 0) return c;
  if (a.upper != b.upper) return a.upper ? 1 : -1;
  return a.seq < b.seq ? -1 : (a.seq > b.seq ? 1 : 0);
}

struct Case {
  RecordSpec spec;
  std::string rg;  // Empty: no RG tag.
  bool rg_is_z = true;
  std::string mi;
  bool has_mi = false;
  std::string mc;  // Empty: no MC tag.
};

RefKey Reference(const Case& c, uint64_t seq) {
  RefKey k;
  const uint16_t flag = c.spec.flag;
  if (!(flag & BAM_FUNMAP)) {
    k.tid1 = c.spec.tid;
    k.neg1 = (flag & BAM_FREVERSE) != 0;
    k.pos1 = FivePrime(c.spec.pos, c.spec.cigar, k.neg1, true);
  }
  if ((flag & BAM_FPAIRED) && !(flag & BAM_FMUNMAP)) {
    k.tid2 = c.spec.mtid;
    k.neg2 = (flag & BAM_FMREVERSE) != 0;
    k.pos2 = FivePrime(c.spec.mpos, c.mc, k.neg2, false);
  }
  if (c.rg_is_z && kLibraries.count(c.rg)) k.library = kLibraries.at(c.rg);
  k.mi = c.has_mi ? c.mi : "";
  k.name = c.spec.name;
  const bool lower = std::make_tuple(k.tid1, k.pos1) < std::make_tuple(k.tid2, k.pos2) ||
                     (k.tid1 == k.tid2 && k.pos1 == k.pos2 && !k.neg1);
  if (!lower) {
    std::swap(k.tid1, k.tid2);
    std::swap(k.pos1, k.pos2);
    std::swap(k.neg1, k.neg2);
  }
  k.upper = !lower;
  k.seq = seq;
  return k;
}

BamPtr Build(Case c) {
  if (!c.rg.empty()) c.spec.aux += AuxZ("RG", c.rg, c.rg_is_z ? 'Z' : 'H');
  if (!c.mc.empty()) c.spec.aux += AuxZ("MC", c.mc);
  if (c.has_mi) c.spec.aux += AuxZ("MI", c.mi);
  return MakeRecord(c.spec);
}

Case RandomCase(std::mt19937_64& rng) {
  static const char* kCigars[] = {"10M",    "5S10M",  "10M3S", "2H3S10M4S1H", "3M2I5M",
                                  "4M3D6M", "2M5N3M", "1=1X",  "7S"};
  static const char* kMates[] = {"10M", "5S10M", "10M3S", "2H3S10M4S1H", "3M2I5M", "*", "4S"};
  static const char* kMis[] = {"7",  "7/A",  "7/B",    "10/A",  "7/AB", "",
                               "/x", "\x80", "\xff/1", "A\x80", "A1",   "A"};
  static const char* kRgs[] = {"", "g1", "g2", "g3", "g4", "gX"};
  static const char* kNames[] = {"pA", "pB", "p", "pA1", "q"};
  static const uint16_t kBits[] = {BAM_FPAIRED,  BAM_FUNMAP,     BAM_FMUNMAP,
                                   BAM_FREVERSE, BAM_FMREVERSE,  BAM_FREAD1,
                                   BAM_FREAD2,   BAM_FSECONDARY, BAM_FSUPPLEMENTARY};
  Case c;
  for (uint16_t bit : kBits) {
    if (rng() % 2 == 0) c.spec.flag |= bit;
  }
  c.spec.name = kNames[rng() % 5];
  c.spec.tid = static_cast<int32_t>(rng() % 2);
  c.spec.pos = static_cast<int64_t>(rng() % 4);
  c.spec.cigar = kCigars[rng() % 9];
  if ((c.spec.flag & BAM_FUNMAP) && rng() % 2 == 0) {
    c.spec.tid = -1;
    c.spec.pos = -1;
    c.spec.cigar.clear();
  }
  c.spec.mtid = static_cast<int32_t>(rng() % 2);
  // A mate flagged mapped without a reference (RNEXT '*'): signed order.
  if (rng() % 20 == 0) c.spec.mtid = -1;
  c.spec.mpos = static_cast<int64_t>(rng() % 4);
  if ((c.spec.flag & BAM_FPAIRED) && !(c.spec.flag & BAM_FMUNMAP)) {
    c.mc = kMates[rng() % 7];
  } else if (rng() % 4 == 0) {
    c.mc = "10M";
  }
  c.rg = kRgs[rng() % 6];
  c.rg_is_z = rng() % 8 != 0;
  c.has_mi = rng() % 4 != 0;
  c.mi = kMis[rng() % 12];
  return c;
}

TEST(TemplateCoordinateKey, MemcmpOrderEqualsSamtoolsOrderOnRandomRecords) {
  std::mt19937_64 rng(31);
  const std::unique_ptr<KeyEncoder> encoder = Encoder();
  std::vector<RefKey> refs;
  std::vector<std::string> keys;
  for (uint64_t seq = 0; seq < 1500; ++seq) {
    const Case c = RandomCase(rng);
    refs.push_back(Reference(c, seq));
    keys.push_back(KeyOf(*encoder, *Build(c), seq));
    EXPECT_LE(keys.back().size(), encoder->max_key_bytes());
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    for (size_t j = 0; j < keys.size(); ++j) {
      ASSERT_EQ(Sign(keys[i].compare(keys[j])), Compare(refs[i], refs[j]))
          << "record " << i << " (" << refs[i].name << ") vs " << j << " (" << refs[j].name << ")";
    }
  }
}

// One key per case, in input order.
std::vector<std::string> Keys(const std::vector<Case>& cases) {
  const std::unique_ptr<KeyEncoder> encoder = Encoder();
  std::vector<std::string> keys;
  for (size_t i = 0; i < cases.size(); ++i) keys.push_back(KeyOf(*encoder, *Build(cases[i]), i));
  return keys;
}

Case Fragment(const std::string& name, uint16_t flag, int32_t tid, int64_t pos,
              const std::string& cigar) {
  Case c;
  c.spec.name = name;
  c.spec.flag = flag;
  c.spec.tid = tid;
  c.spec.pos = pos;
  c.spec.cigar = cigar;
  return c;
}

TEST(TemplateCoordinateKey, ClipsCountInTheUnclippedFivePrimeEnd) {
  // Unclipped starts: 100 - 5 = 95 (1-based 96) before 97 (1-based).
  const std::vector<std::string> keys =
      Keys({Fragment("a", 0, 0, 96, "10M"), Fragment("b", 0, 0, 100, "5S10M")});
  EXPECT_LT(keys[1], keys[0]);
  // Reverse: the 5' end is the unclipped end: 100 + 10 + 3 > 100 + 12.
  const std::vector<std::string> rev = Keys(
      {Fragment("a", BAM_FREVERSE, 0, 100, "10M3S"), Fragment("b", BAM_FREVERSE, 0, 100, "12M")});
  EXPECT_LT(rev[1], rev[0]);
}

TEST(TemplateCoordinateKey, ReverseStrandSortsFirstAtTheSameEnd) {
  // Both 5' ends at 1-based 11: forward at pos 10, reverse ending at 11.
  const std::vector<std::string> keys =
      Keys({Fragment("a", 0, 0, 10, "5M"), Fragment("b", BAM_FREVERSE, 0, 6, "5M")});
  EXPECT_LT(keys[1], keys[0]);
}

TEST(TemplateCoordinateKey, MateReferenceOrdersBeforeOwnPosition) {
  // Same tid1; the pair with its mate on chr1 (tid 0) comes before the
  // unpaired read (tid2 INT32_MAX) even though it starts later.
  Case pair = Fragment("p", BAM_FPAIRED | BAM_FREAD1, 1, 500, "10M");
  pair.spec.mtid = 0;
  pair.spec.mpos = 900;
  pair.mc = "10M";
  const std::vector<std::string> keys = Keys({Fragment("u", 0, 1, 10, "10M"), pair});
  EXPECT_LT(keys[1], keys[0]);
}

TEST(TemplateCoordinateKey, BothEndsOfAPairGetTheSameEndsLowerFirst) {
  Case r1 = Fragment("p", BAM_FPAIRED | BAM_FREAD1 | BAM_FMREVERSE, 0, 99, "10M");
  r1.spec.mtid = 0;
  r1.spec.mpos = 199;
  r1.mc = "10M";
  Case r2 = Fragment("p", BAM_FPAIRED | BAM_FREAD2 | BAM_FREVERSE, 0, 199, "10M");
  r2.spec.mtid = 0;
  r2.spec.mpos = 99;
  r2.mc = "10M";
  const std::vector<std::string> keys = Keys({r2, r1});
  // Identical up to the upper byte and seq: 4+4+8+8+1 + "\0" + "\0" + "p\0".
  const size_t common = 25 + 1 + 1 + 2;
  EXPECT_EQ(keys[0].substr(0, common), keys[1].substr(0, common));
  EXPECT_LT(keys[1], keys[0]);  // r1 is the lower end: first despite seq 1.
}

TEST(TemplateCoordinateKey, LibraryComesFromTheReadGroupsLb) {
  Case a = Fragment("z", 0, 0, 10, "10M");
  a.rg = "g2";  // libA
  Case b = Fragment("a", 0, 0, 10, "10M");
  b.rg = "g1";  // libB
  Case none = Fragment("zz", 0, 0, 10, "10M");
  none.rg = "g3";  // No LB: "", like no RG.
  const std::vector<std::string> keys = Keys({b, a, none});
  EXPECT_LT(keys[2], keys[1]);
  EXPECT_LT(keys[1], keys[0]);
}

TEST(TemplateCoordinateKey, TrailingSlashAndOneCharacterOfMiAreIgnored) {
  auto with_mi = [](const std::string& name, const std::string& mi) {
    Case c = Fragment(name, 0, 0, 10, "10M");
    c.mi = mi;
    c.has_mi = true;
    return c;
  };
  // As samtools' own golden order: 10/A, 7, 7/B, 7/A (ties by name), 7/AB.
  const std::vector<std::string> keys =
      Keys({with_mi("n1", "7/B"), with_mi("n2", "7/A"), with_mi("n3", "10/A"), with_mi("n0", "7"),
            with_mi("m9", "7/AB")});
  EXPECT_LT(keys[2], keys[3]);
  EXPECT_LT(keys[3], keys[0]);
  EXPECT_LT(keys[0], keys[1]);
  EXPECT_LT(keys[1], keys[4]);
}

TEST(TemplateCoordinateKey, MiBytesCompareAsSignedChar) {
  std::string key_high, key_low;
  internal::AppendMolecularId("\x80", &key_high);
  internal::AppendMolecularId("\x7f", &key_low);
  EXPECT_LT(key_high, key_low);
  std::string empty, one;
  internal::AppendMolecularId("", &empty);
  internal::AppendMolecularId("\x80", &one);
  EXPECT_LT(empty, one);
}

TEST(TemplateCoordinateKey, MissingMcIsAnErrorNamingFixmate) {
  const std::unique_ptr<KeyEncoder> encoder = Encoder();
  for (uint16_t extra : {0, BAM_FUNMAP, BAM_FSECONDARY, BAM_FSUPPLEMENTARY}) {
    Case c = Fragment("p", BAM_FPAIRED | extra, 0, 10, "10M");
    c.spec.mtid = 0;
    c.spec.mpos = 50;
    std::string key;
    const absl::Status s = encoder->Append(*Build(c), 0, &key);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << extra;
    EXPECT_NE(s.message().find("MC"), absl::string_view::npos) << s;
    EXPECT_NE(s.message().find("fixmate"), absl::string_view::npos) << s;
    EXPECT_TRUE(key.empty());
  }
  // A malformed MC (no NUL) is no MC tag for htslib, hence for samtools.
  Case c = Fragment("p", BAM_FPAIRED, 0, 10, "10M");
  c.spec.mtid = 0;
  c.spec.aux = std::string("MCZ10M", 6);
  std::string key;
  EXPECT_NE(encoder->Append(*Build(c), 0, &key).message().find("fixmate"), absl::string_view::npos);
}

TEST(TemplateCoordinateKey, NoMcNeededWhenTheMateIsUnmappedOrUnpaired) {
  const std::unique_ptr<KeyEncoder> encoder = Encoder();
  Case mate_unmapped = Fragment("p", BAM_FPAIRED | BAM_FMUNMAP, 0, 10, "10M");
  Case unpaired = Fragment("u", 0, 0, 10, "10M");
  std::string key;
  EXPECT_TRUE(encoder->Append(*Build(mate_unmapped), 0, &key).ok());
  EXPECT_TRUE(encoder->Append(*Build(unpaired), 1, &key).ok());
}

TEST(TemplateCoordinateKey, NonStringMcOrMiIsAnError) {
  const std::unique_ptr<KeyEncoder> encoder = Encoder();
  Case c = Fragment("p", BAM_FPAIRED, 0, 10, "10M");
  c.spec.mtid = 0;
  c.spec.aux = AuxInt("MC", 'i', 10);
  std::string key;
  absl::Status s = encoder->Append(*Build(c), 0, &key);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("MC"), absl::string_view::npos);
  Case h = c;
  h.spec.aux = AuxZ("MC", "10M", 'H');  // H passes bam_aux2Z: accepted.
  EXPECT_TRUE(encoder->Append(*Build(h), 0, &key).ok());
  Case mi = Fragment("u", 0, 0, 10, "10M");
  mi.spec.aux = AuxInt("MI", 'C', 7);
  s = encoder->Append(*Build(mi), 0, &key);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("MI"), absl::string_view::npos);
}

TEST(TemplateCoordinateKey, MateCigarIsParsedAsSamtoolsParsesIt) {
  using internal::MateUnclippedEnd;
  using internal::MateUnclippedStart;
  EXPECT_EQ(MateUnclippedStart(99, "5S10M"), 95);
  EXPECT_EQ(MateUnclippedStart(99, "2H3S10M"), 95);
  EXPECT_EQ(MateUnclippedStart(99, "H10M"), 99);  // No number: 1.
  EXPECT_EQ(MateUnclippedStart(99, "*"), 100);
  EXPECT_EQ(MateUnclippedStart(99, "10"), 100);  // No operator: stops.
  EXPECT_EQ(MateUnclippedEnd(99, "10M3S"), 112);
  EXPECT_EQ(MateUnclippedEnd(99, "3S10M"), 109);  // Leading clips do not count.
  EXPECT_EQ(MateUnclippedEnd(99, "4M2I3D1N2=1X"), 110);
  EXPECT_EQ(MateUnclippedEnd(99, "*"), 99);
  EXPECT_EQ(MateUnclippedEnd(99, "10M5"), 109);  // Trailing number: stops.
  // Lengths past int64 saturate like strtol; sums wrap, never trap.
  EXPECT_EQ(MateUnclippedStart(0, "99999999999999999999999S1M"), 1 - INT64_MAX);
  EXPECT_EQ(MateUnclippedEnd(0, "99999999999999999999999M"), INT64_MAX);
  MateUnclippedEnd(5, "99999999999999999999999M99999999999999999999999M");
}

TEST(TemplateCoordinateKey, UnmappedEndsUseSamtoolsSentinels) {
  const std::vector<std::string> keys = Keys({Fragment("u", BAM_FUNMAP, -1, -1, "")});
  // tid1 = tid2 = INT32_MAX, pos1 = pos2 = HTS_POS_MAX, both forward.
  const std::string expected_start(
      "\xff\xff\xff\xff"
      "\xff\xff\xff\xff"
      "\xff\xff\xff\xff\x7f\xff\xff\xff"
      "\xff\xff\xff\xff\x7f\xff\xff\xff"
      "\x03",
      25);
  EXPECT_EQ(keys[0].substr(0, 25), expected_start);
}

TEST(TemplateCoordinateKey, MaxKeyBytesCountsTheLongestLibrary) {
  const size_t without_rg = Encoder("@HD\tVN:1.6\n")->max_key_bytes();
  EXPECT_EQ(without_rg, 25 + 1 + 1025 + 255 + 1 + 8u);
  EXPECT_EQ(Encoder()->max_key_bytes(), without_rg + 5);  // "libA2".
  Case c = Fragment(std::string(254, 'n'), 0, 0, 10, "10M");
  c.rg = "g4";
  c.has_mi = true;
  c.mi = std::string(internal::kBoundedTagStringBytes, 'm');
  const std::unique_ptr<KeyEncoder> encoder = Encoder();
  EXPECT_EQ(KeyOf(*encoder, *Build(c), 0).size(), encoder->max_key_bytes());
}

}  // namespace
}  // namespace rocksort::keycodec
