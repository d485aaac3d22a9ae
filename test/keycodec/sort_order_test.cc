// File: test/keycodec/sort_order_test.cc
// -----------------------------------------------------------------------------
// ApplySortOrder writes the @HD line samtools 1.23.1's set_sort_order
// writes, and MakeKeyEncoder picks (or refuses) an encoder per SortOrder.
// The golden test checks the same headers against samtools' own output.
#include <string>

#include "gtest/gtest.h"
#include "keycodec/keycodec.h"
#include "keycodec/sort_order.h"
#include "keycodec/test_records.h"

namespace rocksort::keycodec {
namespace {

using test_util::HeaderPtr;
using test_util::ParseHeader;

// The first line of the header after ApplySortOrder.
std::string HdLineAfter(const SortOrder& order, const std::string& header_text) {
  HeaderPtr h = ParseHeader(header_text);
  EXPECT_NE(h, nullptr);
  const absl::Status s = ApplySortOrder(order, h.get());
  EXPECT_TRUE(s.ok()) << s;
  const std::string text = sam_hdr_str(h.get());
  return text.substr(0, text.find('\n'));
}

const SortOrder kCoordinate{OrderKind::kCoordinate, true, ""};
const SortOrder kNatural{OrderKind::kQueryName, true, ""};
const SortOrder kTemplate{OrderKind::kTemplateCoordinate, true, ""};

TEST(ApplySortOrder, AddsHdWithSamtoolsVersionWhenMissing) {
  const std::string sq = "@SQ\tSN:chr1\tLN:10\n";
  EXPECT_EQ(HdLineAfter(kCoordinate, sq), "@HD\tVN:1.6\tSO:coordinate");
  EXPECT_EQ(HdLineAfter(kTemplate, sq),
            "@HD\tVN:1.6\tSO:unsorted\tGO:query\tSS:unsorted:template-coordinate");
  EXPECT_EQ(HdLineAfter(SortOrder{OrderKind::kQueryName, false, "AS"}, sq),
            "@HD\tVN:1.6\tSO:unsorted\tSS:unsorted:AS:queryname:lexicographical");
}

TEST(ApplySortOrder, UpdatesInPlaceKeepingVnAndTagOrder) {
  const std::string hd = "@HD\tVN:1.4\tSS:coordinate:foo\tGO:query\tSO:queryname\n";
  EXPECT_EQ(HdLineAfter(kNatural, hd), "@HD\tVN:1.4\tSS:queryname:natural\tSO:queryname");
  EXPECT_EQ(HdLineAfter(kTemplate, hd),
            "@HD\tVN:1.4\tSS:unsorted:template-coordinate\tGO:query\tSO:unsorted");
  EXPECT_EQ(HdLineAfter(SortOrder{OrderKind::kCoordinate, true, "RG"}, hd),
            "@HD\tVN:1.4\tSS:unsorted:RG:coordinate\tSO:unsorted");
}

TEST(ApplySortOrder, RemovesGoAndSsTheOrderDoesNotSet) {
  EXPECT_EQ(HdLineAfter(kCoordinate, "@HD\tVN:1.6\tSO:unsorted\tGO:query\tSS:x:y\n"),
            "@HD\tVN:1.6\tSO:coordinate");
}

TEST(ApplySortOrder, AppendsNewTagsAfterExistingOnes) {
  EXPECT_EQ(HdLineAfter(kTemplate, "@HD\tVN:1.6\n"),
            "@HD\tVN:1.6\tSO:unsorted\tGO:query\tSS:unsorted:template-coordinate");
}

TEST(ApplySortOrder, AddedVersionIsHtslibsSamFormatVersion) {
  EXPECT_STREQ(kAddedHeaderVersion, SAM_FORMAT_VERSION);
}

TEST(MakeKeyEncoder, EveryOrderHasAnEncoder) {
  HeaderPtr h = ParseHeader("@HD\tVN:1.6\n");
  for (const SortOrder& order :
       {kCoordinate, kNatural, kTemplate, SortOrder{OrderKind::kQueryName, false, ""},
        SortOrder{OrderKind::kCoordinate, true, "XT"},
        SortOrder{OrderKind::kQueryName, false, "XT"},
        SortOrder{OrderKind::kMinimiser, true, ""}}) {
    absl::StatusOr<std::unique_ptr<KeyEncoder>> e = MakeKeyEncoder(order, *h);
    EXPECT_TRUE(e.ok()) << order.Describe() << ": " << e.status();
  }
  absl::StatusOr<std::unique_ptr<KeyEncoder>> coordinate = MakeKeyEncoder(kCoordinate, *h);
  ASSERT_TRUE(coordinate.ok());
  EXPECT_EQ((*coordinate)->max_key_bytes(), kCoordinateKeySize);
}

TEST(MakeKeyEncoder, RefusesOrdersFromFlagsCannotProduce) {
  HeaderPtr h = ParseHeader("@HD\tVN:1.6\n");
  EXPECT_EQ(
      MakeKeyEncoder(SortOrder{OrderKind::kTemplateCoordinate, true, "RG"}, *h).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeKeyEncoder(SortOrder{OrderKind::kCoordinate, true, "R"}, *h).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SortOrder, TagWithTemplateCoordinateBecomesTagThenCoordinate) {
  absl::StatusOr<SortOrder> o = SortOrder::FromFlags(OrderKind::kTemplateCoordinate, false, "RGX");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(*o, (SortOrder{OrderKind::kCoordinate, true, "RG"}));
}

// samtools' set_sort_order for -M: coordinate when any read is placed,
// unsorted when none is; -t replaces -M by tag-then-coordinate.
TEST(SortOrder, MinimiserHeaderDependsOnWhetherAnyReadIsPlaced) {
  const SortOrder minimiser{OrderKind::kMinimiser, true, ""};
  const HeaderSortFields placed = HeaderFieldsFor(minimiser, /*placed=*/true);
  EXPECT_EQ(placed.so, "coordinate");
  EXPECT_EQ(placed.ss, "coordinate:minhash");
  EXPECT_EQ(placed.go, "");
  const HeaderSortFields unplaced = HeaderFieldsFor(minimiser, /*placed=*/false);
  EXPECT_EQ(unplaced.so, "unsorted");
  EXPECT_EQ(unplaced.ss, "unsorted:minhash");
  HeaderPtr h = ParseHeader("@HD\tVN:1.4\tGO:query\n");
  ASSERT_TRUE(ApplySortOrder(minimiser, h.get(), /*placed=*/false).ok());
  EXPECT_EQ(std::string(sam_hdr_str(h.get())), "@HD\tVN:1.4\tSO:unsorted\tSS:unsorted:minhash\n");
  // Only the minimiser order looks at `placed`.
  EXPECT_EQ(HeaderFieldsFor(kCoordinate, false).so, "coordinate");

  absl::StatusOr<SortOrder> tagged = SortOrder::FromFlags(OrderKind::kMinimiser, false, "RG");
  ASSERT_TRUE(tagged.ok());
  EXPECT_EQ(*tagged, (SortOrder{OrderKind::kCoordinate, true, "RG"}));
  EXPECT_TRUE(minimiser.indexable());
  EXPECT_FALSE(minimiser.is_coordinate());
  EXPECT_FALSE(tagged->indexable());
  SortOrder squashed = minimiser;
  squashed.minimiser.squash_homopolymers = true;
  EXPECT_FALSE(squashed == minimiser);
  EXPECT_EQ(squashed.Describe(),
            "coordinate, unplaced reads by minimiser (k 20, both strands, homopolymers squashed)");
}

}  // namespace
}  // namespace rocksort::keycodec
