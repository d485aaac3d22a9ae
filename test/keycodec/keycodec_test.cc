#include "keycodec/keycodec.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace rocksort::keycodec {
namespace {

std::string Encode(const CoordinateKey& key) {
  std::string out(kCoordinateKeySize, '\0');
  EncodeCoordinateKey(key, out.data());
  return out;
}

TEST(KeyCodec, LayoutIsPinnedByteForByte) {
  // tid 1, pos 99 (1-based 100), reverse, seq 0x0102030405060708.
  const std::string key = Encode({1, 99, true, 0x0102030405060708ULL});
  const unsigned char expected[16] = {0,    0, 0, 1, 0, 0, 0, 100,  // pos + 1
                                      0x81, 2, 3, 4, 5, 6, 7, 8};   // reverse << 63 | seq
  ASSERT_EQ(key.size(), 16u);
  EXPECT_EQ(std::memcmp(key.data(), expected, 16), 0);
}

TEST(KeyCodec, UnmappedReadsSortLast) {
  EXPECT_LT(Encode({1000000, kMaxPosition, true, 99}), Encode({-1, -1, false, 0}));
}

TEST(KeyCodec, NoPositionSortsFirstWithinReference) {
  EXPECT_LT(Encode({3, -1, true, 9}), Encode({3, 0, false, 0}));
}

TEST(KeyCodec, ForwardStrandBeforeReverseAtSamePosition) {
  EXPECT_LT(Encode({0, 5, false, 9}), Encode({0, 5, true, 0}));
}

TEST(KeyCodec, TiesKeepInputOrder) {
  EXPECT_LT(Encode({0, 5, true, 1}), Encode({0, 5, true, 2}));
  EXPECT_LT(Encode({0, 5, true, 255}), Encode({0, 5, true, 256}));
}

TEST(KeyCodec, RoundTrips) {
  for (const CoordinateKey& key : {CoordinateKey{-1, -1, false, 0}, CoordinateKey{0, 0, true, 1},
                                   CoordinateKey{2147483646, kMaxPosition, true, kMaxSequence},
                                   CoordinateKey{7, kMaxPosition, false, kMaxSequence}}) {
    absl::StatusOr<CoordinateKey> decoded = DecodeCoordinateKey(Encode(key));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, key);
  }
  EXPECT_EQ(DecodeCoordinateKey("short").status().code(), absl::StatusCode::kDataLoss);
}

// htslib reads pos = 2^31 - 1 (SAM POS 2147483648, past the spec's limit but
// within BAM's int32) and samtools sorts it after 2^31 - 2; the old layout,
// (pos + 1) << 1 | strand in 32 bits, had no key for it.
TEST(KeyCodec, LargestBamPositionSortsLastWithinItsReference) {
  EXPECT_EQ(kMaxPosition, 2147483647);
  EXPECT_LT(Encode({0, kMaxPosition - 1, true, 9}), Encode({0, kMaxPosition, false, 0}));
  EXPECT_LT(Encode({0, kMaxPosition, true, 0}), Encode({1, -1, false, 0}));
}

TEST(KeyCodec, RejectsCoordinatesOutsideBam) {
  EXPECT_TRUE(CheckCoordinate(-1, -1).ok());
  EXPECT_TRUE(CheckCoordinate(5, kMaxPosition).ok());
  EXPECT_FALSE(CheckCoordinate(-2, 0).ok());
  EXPECT_FALSE(CheckCoordinate(0, -2).ok());
  EXPECT_FALSE(CheckCoordinate(0, kMaxPosition + 1).ok());
}

// memcmp on encoded keys must agree with samtools' comparator on random
// records drawn to collide often (few tids and positions, both strands,
// unmapped, pos -1) so that every tie-breaking level is exercised.
TEST(KeyCodec, MemcmpOrderEqualsSamtoolsOrderOnRandomRecords) {
  std::mt19937_64 rng(12345);
  std::vector<CoordinateKey> keys;
  for (uint64_t seq = 0; seq < 20000; ++seq) {
    CoordinateKey k;
    const int kind = static_cast<int>(rng() % 10);
    k.tid = kind == 0 ? -1 : static_cast<int32_t>(rng() % 4);
    if (kind == 1) k.tid = static_cast<int32_t>(rng() % 0x7fffffff);
    k.pos = kind == 2 ? -1 : static_cast<int64_t>(rng() % 50);
    if (kind == 3) k.pos = kMaxPosition - static_cast<int64_t>(rng() % 3);
    k.reverse = (rng() & 1) != 0;
    k.seq = kind == 4 ? (rng() % 4) << 32 | (rng() & 0xff) : seq;
    keys.push_back(k);
  }
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    for (size_t j : {i + 1, static_cast<size_t>(rng() % keys.size())}) {
      const CoordinateKey& a = keys[i];
      const CoordinateKey& b = keys[j];
      if (a == b) continue;
      const int c = Encode(a).compare(Encode(b));
      EXPECT_EQ(c < 0, SamtoolsCoordinateLess(a, b)) << i << " vs " << j;
      EXPECT_EQ(c > 0, SamtoolsCoordinateLess(b, a)) << i << " vs " << j;
    }
  }
}

}  // namespace
}  // namespace rocksort::keycodec
