#include "common/record_checksum.h"

#include "gtest/gtest.h"

namespace rocksort {
namespace {

TEST(RecordChecksumTest, IgnoresOrderButSeesEveryByte) {
  RecordChecksum a, b, c, pieces;
  a.AddRecord("alpha", 5);
  a.AddRecord("beta", 4);
  b.AddRecord("beta", 4);
  b.AddRecord("alpha", 5);
  EXPECT_EQ(a.value(), b.value());
  c.AddRecord("alphb", 5);
  c.AddRecord("beta", 4);
  EXPECT_NE(a.value(), c.value());
  pieces.AddPiece("al", 2);
  pieces.AddPiece("pha", 3);
  pieces.EndRecord();
  pieces.AddRecord("beta", 4);
  EXPECT_EQ(a.value(), pieces.value());
  RecordChecksum duplicated;
  duplicated.AddRecord("alpha", 5);
  duplicated.AddRecord("alpha", 5);
  duplicated.AddRecord("beta", 4);
  EXPECT_NE(a.value(), duplicated.value());
}

}  // namespace
}  // namespace rocksort
