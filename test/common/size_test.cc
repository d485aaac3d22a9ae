#include "common/size.h"

#include "gtest/gtest.h"

namespace rocksort {
namespace {

TEST(ParseSize, AcceptsSamtoolsSuffixesAsPowersOf1024) {
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("768M"), 768ull << 20);
  EXPECT_EQ(*ParseSize("768m"), 768ull << 20);
  EXPECT_EQ(*ParseSize("2K"), 2048u);
  EXPECT_EQ(*ParseSize("512G"), 512ull << 30);
  EXPECT_EQ(*ParseSize("1T"), 1ull << 40);
}

// samtools reads "1MB" and "1MiB" as 1M.
TEST(ParseSize, ByteUnitsAfterTheSuffixAreTheSameSize) {
  EXPECT_EQ(*ParseSize("768MB"), 768ull << 20);
  EXPECT_EQ(*ParseSize("768MiB"), 768ull << 20);
  EXPECT_EQ(*ParseSize("2kb"), 2048u);
  EXPECT_EQ(*ParseSize("1.5GiB"), 3ull << 29);
  EXPECT_EQ(*ParseSize("1TB"), 1ull << 40);
}

TEST(ParseSize, FractionsAreNotTruncatedToTheIntegerPart) {
  // samtools#319: "2.5G" was silently read as 2 bytes.
  EXPECT_EQ(*ParseSize("2.5G"), 5ull << 29);
}

TEST(ParseSize, RejectsEverythingElse) {
  for (const char* bad : {"", "G", "-1", "12Q", "1e9", " 5", "5 ", "1.2.3M", "0x10", "1B", "GB",
                          "1GBB", "1Gi", "1iB", "1G B"}) {
    EXPECT_FALSE(ParseSize(bad).ok()) << bad;
  }
}

TEST(FormatSize, UsesTheLargestExactSuffix) {
  EXPECT_EQ(FormatSize(768ull << 20), "768M");
  EXPECT_EQ(FormatSize(1ull << 40), "1T");
  EXPECT_EQ(FormatSize(1000), "1000");
  EXPECT_EQ(FormatSize(1536), "1536");
}

}  // namespace
}  // namespace rocksort
