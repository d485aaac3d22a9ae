#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "htslib/sam.h"
#include "loader/header_merge_internal.h"

namespace rocksort::loader {
namespace {

HeaderPtr Parse(const std::string& text) {
  HeaderPtr h(sam_hdr_parse(text.size(), text.c_str()));
  EXPECT_TRUE(h != nullptr) << text;
  return h;
}

absl::StatusOr<MergedHeader> Merge(const std::vector<std::string>& texts) {
  std::vector<HeaderPtr> owned;
  std::vector<sam_hdr_t*> headers;
  std::vector<std::string> names;
  for (const std::string& text : texts) {
    owned.push_back(Parse(text));
    headers.push_back(owned.back().get());
    names.push_back("in" + std::to_string(names.size() + 1) + ".sam");
  }
  return MergeHeaders(headers, names);
}

std::string Text(const MergedHeader& m) {
  const char* text = sam_hdr_str(m.header.get());
  return text == nullptr ? "" : text;
}

const char kFirst[] =
    "@HD\tVN:1.6\tSO:unsorted\n"
    "@SQ\tSN:c1\tLN:1000\n"
    "@RG\tID:g1\tSM:a\tPG:bwa\n"
    "@PG\tID:bwa\tPN:bwa\n"
    "@PG\tID:x\tPN:x\tPP:bwa\n"
    "@CO\tone\n";
const char kSecond[] =
    "@HD\tVN:1.4\n"
    "@SQ\tSN:c1\tLN:1000\n"
    "@RG\tID:g1\tSM:b\tPG:bwa\n"
    "@RG\tID:g2\tSM:c\n"
    "@PG\tID:bwa\tPN:bwa2\n"
    "@CO\ttwo\n";

// What `samtools merge -s 0` (1.16.1 and 1.23.1 alike) writes for these two
// headers: the first @HD; the @SQ lines; every @RG, then every @PG, then
// every @CO; colliding IDs of the second input suffixed from lrand48, and
// the references to them (@RG PG:, @PG PP:) following.
TEST(MergeHeaders, CombinesLinesAndRenamesCollidingIdsAsSamtoolsMerge) {
  absl::StatusOr<MergedHeader> m = Merge({kFirst, kSecond});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Text(*m),
            "@HD\tVN:1.6\tSO:unsorted\n"
            "@SQ\tSN:c1\tLN:1000\n"
            "@RG\tID:g1\tSM:a\tPG:bwa\n"
            "@RG\tID:g1-15DDB16E\tSM:b\tPG:bwa-5FFCC9C0\n"
            "@RG\tID:g2\tSM:c\n"
            "@PG\tID:bwa\tPN:bwa\n"
            "@PG\tID:x\tPN:x\tPP:bwa\n"
            "@PG\tID:bwa-5FFCC9C0\tPN:bwa2\n"
            "@CO\tone\n"
            "@CO\ttwo\n");
  ASSERT_EQ(m->translations.size(), 2u);
  EXPECT_FALSE(m->translations[0].renamed);
  EXPECT_TRUE(m->translations[1].renamed);
  EXPECT_EQ(m->translations[1].rg.at("g1"), "g1-15DDB16E");
  EXPECT_EQ(m->translations[1].rg.at("g2"), "g2");
  EXPECT_EQ(m->translations[1].pg.at("bwa"), "bwa-5FFCC9C0");
  EXPECT_EQ(sam_hdr_nref(m->header.get()), 1);
}

TEST(MergeHeaders, HdComesFromTheFirstInputThatHasOne) {
  absl::StatusOr<MergedHeader> m =
      Merge({"@SQ\tSN:c1\tLN:10\n", "@HD\tVN:1.5\tSO:queryname\n@SQ\tSN:c1\tLN:10\n"});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Text(*m), "@HD\tVN:1.5\tSO:queryname\n@SQ\tSN:c1\tLN:10\n");
}

TEST(MergeHeaders, NoLinesAtAllMakesAnEmptyHeader) {
  absl::StatusOr<MergedHeader> m = Merge({"", ""});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Text(*m), "");
  EXPECT_EQ(sam_hdr_nref(m->header.get()), 0);
}

// The same ID in four inputs gets three different suffixes, of 8 digits
// (the third, 0x0C55E80A, with its leading zero, as samtools 1.23.1).
TEST(MergeHeaders, EachCollisionGetsItsOwnSuffix) {
  const std::string text = "@SQ\tSN:c1\tLN:10\n@RG\tID:lane\n";
  absl::StatusOr<MergedHeader> m = Merge({text, text, text, text});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Text(*m),
            "@SQ\tSN:c1\tLN:10\n@RG\tID:lane\n@RG\tID:lane-15DDB16E\n@RG\tID:lane-5FFCC9C0\n"
            "@RG\tID:lane-0C55E80A\n");
}

TEST(MergeHeaders, DifferentReferencesAreRefusedNamingTheInputAndLine) {
  const std::string first = "@SQ\tSN:c1\tLN:1000\n@SQ\tSN:c2\tLN:500\n";
  struct Case {
    std::string second;
    std::string shown;  // The line the message must quote.
  };
  for (const Case& c : std::vector<Case>{
           {"@SQ\tSN:c1\tLN:1000\n@SQ\tSN:c2\tLN:501\n", "@SQ SN:c2 LN:501"},
           {"@SQ\tSN:c1\tLN:1000\n@SQ\tSN:c3\tLN:500\n", "@SQ SN:c3 LN:500"},
           {"@SQ\tSN:c2\tLN:500\n@SQ\tSN:c1\tLN:1000\n", "@SQ SN:c2 LN:500"},
           {"@SQ\tSN:c1\tLN:1000\n", "@SQ SN:c2 LN:500"},
           {"@SQ\tSN:c1\tLN:1000\n@SQ\tSN:c2\tLN:500\n@SQ\tSN:c3\tLN:9\n", "@SQ SN:c3 LN:9"},
       }) {
    SCOPED_TRACE(c.second);
    absl::StatusOr<MergedHeader> m = Merge({first, first, c.second});
    ASSERT_FALSE(m.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(m.status()));
    EXPECT_TRUE(absl::StartsWith(m.status().message(), "in3.sam: ")) << m.status();
    EXPECT_TRUE(absl::StrContains(m.status().message(), "in1.sam")) << m.status();
    EXPECT_TRUE(absl::StrContains(m.status().message(), c.shown)) << m.status();
  }
}

TEST(MergeHeaders, M5MustAgreeWhereBothHaveOne) {
  const std::string a = "@SQ\tSN:c1\tLN:10\tM5:00112233445566778899aabbccddeeff\n";
  const std::string b = "@SQ\tSN:c1\tLN:10\tM5:ffeeddccbbaa99887766554433221100\n";
  const std::string none = "@SQ\tSN:c1\tLN:10\tUR:file:/elsewhere.fa\n";
  EXPECT_FALSE(Merge({a, b}).ok());
  absl::StatusOr<MergedHeader> m = Merge({a, none});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Text(*m), a);  // The first input's @SQ lines.
}

TEST(Rand48, MatchesTheCLibrarysLrand48) {
  for (long seed : {0L, 1L, 42L, 1700000000L}) {
    ::srand48(seed);
    Rand48 r(seed);
    for (int i = 0; i < 100; ++i) ASSERT_EQ(r.Next(), ::lrand48()) << seed << " " << i;
  }
}

// A record with a renamed ID gets the new one, and (as samtools merge
// rewrites it) RG then PG move to the end of its tags; others are left alone.
TEST(RewriteIds, RenamedIdsAreRewrittenOthersUntouched) {
  const HeaderPtr h = Parse("@SQ\tSN:c1\tLN:1000\n");
  IdTranslation t;
  t.rg = {{"g1", "g1-15DDB16E"}, {"g2", "g2"}};
  t.pg = {{"bwa", "bwa-5FFCC9C0"}};
  t.renamed = true;
  auto Rewritten = [&](const std::string& tags) {
    std::string line = "r\t0\tc1\t10\t30\t4M\t*\t0\t0\tACGT\tIIII\t" + tags;
    kstring_t ks = {line.size(), line.size() + 1, line.data()};
    RecordPtr b(bam_init1());
    EXPECT_GE(sam_parse1(&ks, h.get(), b.get()), 0) << line;
    EXPECT_TRUE(RewriteIds(t, b.get()).ok());
    kstring_t out = {0, 0, nullptr};
    EXPECT_GE(sam_format1(h.get(), b.get(), &out), 0);
    std::string text(out.s, out.l);
    free(out.s);
    return text.substr(text.find("IIII\t") + 5);
  };
  EXPECT_EQ(Rewritten("RG:Z:g1\tXX:i:1"), "XX:i:1\tRG:Z:g1-15DDB16E");
  EXPECT_EQ(Rewritten("PG:Z:bwa\tRG:Z:g2\tXX:i:1"), "XX:i:1\tRG:Z:g2\tPG:Z:bwa-5FFCC9C0");
  EXPECT_EQ(Rewritten("RG:Z:g2\tXX:i:1\tPG:Z:other"), "RG:Z:g2\tXX:i:1\tPG:Z:other");
  EXPECT_EQ(Rewritten("RG:Z:unknown\tPG:Z:bwa"), "RG:Z:unknown\tPG:Z:bwa-5FFCC9C0");
  EXPECT_EQ(Rewritten("XX:i:1"), "XX:i:1");
}

}  // namespace
}  // namespace rocksort::loader
