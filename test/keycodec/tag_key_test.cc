// File: test/keycodec/tag_key_test.cc
// -----------------------------------------------------------------------------
// The -t TAG keys against a reference comparator written here from samtools
// 1.23.1's bam1_cmp_by_tag rules (reading values with htslib's own
// bam_aux_get / bam_aux2*), on random records built to collide: every aux
// type, arrays, -0.0, NaN, infinities, the extremes of every integer type,
// strings that are prefixes of each other, a missing tag; then coordinate or
// name order, then input order. Also: the malformed-aux rule and the bound.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "htslib/hts_log.h"
#include "keycodec/key_parts_internal.h"
#include "keycodec/keycodec.h"
#include "keycodec/reference_orders.h"
#include "keycodec/test_records.h"

namespace rocksort::keycodec {
namespace {

using test_util::AuxA;
using test_util::AuxArray;
using test_util::AuxDouble;
using test_util::AuxFloat;
using test_util::AuxInt;
using test_util::AuxZ;
using test_util::BamPtr;
using test_util::FlagCompare;
using test_util::KeyOf;
using test_util::MakeRecord;
using test_util::RecordSpec;
using test_util::Sign;
using test_util::TokenRulesCompare;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::unique_ptr<KeyEncoder> Encoder(OrderKind kind, bool natural, const char* tag = "XT") {
  absl::StatusOr<std::unique_ptr<KeyEncoder>> e =
      MakeKeyEncoder(SortOrder{kind, natural, tag}, *test_util::ParseHeader(""));
  EXPECT_TRUE(e.ok()) << e.status();
  return std::move(*e);
}

// The tag value as samtools sees it, with rocksort's NaN rule: class 0 no
// tag, 1 A, 2 B, 3 Z/H, 4 number, 5 NaN.
struct RefValue {
  int cls = 0;
  unsigned char a = 0;
  std::string s;
  bool is_int = false;
  int64_t i = 0;
  double f = 0;
};

RefValue ReadReference(const bam1_t& b, const char* tag) {
  RefValue v;
  const uint8_t* aux = bam_aux_get(&b, tag);
  if (aux == nullptr) return v;
  switch (aux[0]) {
    case 'A':
      v.cls = 1;
      v.a = static_cast<unsigned char>(bam_aux2A(aux));
      return v;
    case 'B':
      v.cls = 2;
      return v;
    case 'Z':
    case 'H':
      v.cls = 3;
      v.s = bam_aux2Z(aux);
      return v;
    case 'f':
    case 'd':
      v.f = bam_aux2f(aux);
      v.cls = std::isnan(v.f) ? 5 : 4;
      return v;
    default:
      v.cls = 4;
      v.is_int = true;
      v.i = bam_aux2i(aux);
      v.f = bam_aux2f(aux);
      return v;
  }
}

int CompareValues(const RefValue& a, const RefValue& b) {
  if (a.cls != b.cls) return a.cls < b.cls ? -1 : 1;
  switch (a.cls) {
    case 1:
      return a.a < b.a ? -1 : (a.a > b.a ? 1 : 0);
    case 3:
      return Sign(std::strcmp(a.s.c_str(), b.s.c_str()));
    case 4:
      if (a.is_int && b.is_int) return a.i < b.i ? -1 : (a.i > b.i ? 1 : 0);
      return a.f < b.f ? -1 : (a.f > b.f ? 1 : 0);
    default:  // No tag, arrays, NaN: all equal.
      return 0;
  }
}

// Values drawn for the tag under test: every class, ties across types.
std::string RandomTag(std::mt19937_64& rng, const char* tag) {
  static const int64_t kInts[] = {
      -2147483648LL, -129, -128,  -3,    -1,           0,           1, 2, 5, 127, 128,
      255,           256,  32767, 65535, 2147483647LL, 4294967295LL};
  static const double kDoubles[] = {
      -0.0,    0.0,          2.5,           -1000, 5.0,
      kNaN,    -kNaN,        kInf,          -kInf, 1e-300,
      -1e-300, 4294967295.0, -2147483648.0, 255.5, std::nextafter(5.0, 6.0)};
  static const char* kStrings[] = {"", "a", "ab", "abc", "b", "\xff", "1A", "1A2B", "A"};
  switch (rng() % 8) {
    case 0:
      return "";
    case 1:
      return AuxA(tag, "az\x01\xff"[rng() % 4]);
    case 2:
      return AuxArray(tag, "cCsSiIf"[rng() % 7], static_cast<uint32_t>(rng() % 3),
                      static_cast<int>(rng() % 256));
    case 3:
      return AuxZ(tag, kStrings[rng() % 9], rng() % 3 == 0 ? 'H' : 'Z');
    case 4:
    case 5: {
      const char type = "cCsSiI"[rng() % 6];
      int64_t v = kInts[rng() % 17];
      // Keep the value within the type so that the test knows it exactly.
      const int64_t lo = type == 'c' ? -128 : type == 's' ? -32768 : type == 'i' ? INT32_MIN : 0;
      const int64_t hi = type == 'c'   ? 127
                         : type == 'C' ? 255
                         : type == 's' ? 32767
                         : type == 'S' ? 65535
                         : type == 'i' ? INT32_MAX
                                       : UINT32_MAX;
      v = std::min(std::max(v, lo), hi);
      return AuxInt(tag, type, v);
    }
    case 6:
      return AuxFloat(tag, static_cast<float>(kDoubles[rng() % 15]));
    default:
      return AuxDouble(tag, kDoubles[rng() % 15]);
  }
}

struct Item {
  BamPtr record;
  uint64_t seq;
  std::string key;
};

// Whole keys of random records: memcmp equals (tag value, secondary, seq).
void CheckRandomRecords(OrderKind kind, bool natural, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::unique_ptr<KeyEncoder> encoder = Encoder(kind, natural);
  static const char* kNames[] = {"r1", "r01", "r2", "r10", "r1a", "r", "s.1", "R1"};
  std::vector<Item> items;
  for (uint64_t seq = 0; seq < 1200; ++seq) {
    RecordSpec spec;
    spec.name = kNames[rng() % 8];
    spec.flag = static_cast<uint16_t>(
        rng() & (BAM_FREVERSE | BAM_FREAD1 | BAM_FREAD2 | BAM_FSECONDARY | BAM_FSUPPLEMENTARY));
    spec.tid = static_cast<int32_t>(rng() % 3) - 1;
    spec.pos = spec.tid < 0 ? -1 : static_cast<int64_t>(rng() % 3) - 1;
    if (spec.tid >= 0) spec.cigar = "10M";
    if (spec.tid < 0) spec.flag |= BAM_FUNMAP;
    // The tag, alone or among others (before and after it).
    if (rng() % 3 == 0) spec.aux += AuxInt("AS", 'i', 1);
    spec.aux += RandomTag(rng, "XT");
    if (rng() % 3 == 0) spec.aux += AuxZ("XA", "x");
    items.push_back({MakeRecord(spec), seq, ""});
    items.back().key = KeyOf(*encoder, *items.back().record, seq);
    EXPECT_LE(items.back().key.size(), encoder->max_key_bytes());
  }
  std::vector<RefValue> values;
  for (const Item& item : items) values.push_back(ReadReference(*item.record, "XT"));
  for (size_t i = 0; i < items.size(); ++i) {
    for (size_t j = 0; j < items.size(); ++j) {
      const bam1_t& a = *items[i].record;
      const bam1_t& b = *items[j].record;
      int expected = CompareValues(values[i], values[j]);
      if (expected == 0 && kind == OrderKind::kQueryName) {
        expected = natural ? Sign(TokenRulesCompare(bam_get_qname(&a), bam_get_qname(&b)))
                           : Sign(std::strcmp(bam_get_qname(&a), bam_get_qname(&b)));
        if (expected == 0) expected = FlagCompare(a.core.flag, b.core.flag);
      } else if (expected == 0) {
        const uint32_t ta = static_cast<uint32_t>(a.core.tid);
        const uint32_t tb = static_cast<uint32_t>(b.core.tid);
        if (ta != tb) expected = ta < tb ? -1 : 1;
        if (expected == 0 && a.core.pos != b.core.pos) {
          expected = a.core.pos < b.core.pos ? -1 : 1;
        }
        if (expected == 0) expected = bam_is_rev(&a) - bam_is_rev(&b);
      }
      if (expected == 0) expected = items[i].seq < items[j].seq ? -1 : (i == j ? 0 : 1);
      ASSERT_EQ(Sign(items[i].key.compare(items[j].key)), expected)
          << "record " << i << " vs " << j;
    }
  }
}

TEST(TagKey, MemcmpOrderEqualsSamtoolsOrderThenCoordinate) {
  CheckRandomRecords(OrderKind::kCoordinate, true, 21);
}

TEST(TagKey, MemcmpOrderEqualsSamtoolsOrderThenNaturalName) {
  CheckRandomRecords(OrderKind::kQueryName, true, 22);
}

TEST(TagKey, MemcmpOrderEqualsSamtoolsOrderThenLexicographicName) {
  CheckRandomRecords(OrderKind::kQueryName, false, 23);
}

// Keys of one unmapped record named "r" carrying `aux`, for value checks:
// the secondary key and seq are the same for all.
std::string ValueKey(const std::string& aux) {
  static const std::unique_ptr<KeyEncoder> encoder = Encoder(OrderKind::kCoordinate, true);
  RecordSpec spec;
  spec.flag = BAM_FUNMAP;
  spec.aux = aux;
  return KeyOf(*encoder, *MakeRecord(spec), 0);
}

TEST(TagKey, MissingTagSortsFirstThenCharArrayStringNumber) {
  const std::string keys[] = {ValueKey(""),
                              ValueKey(AuxA("XT", 0xff)),
                              ValueKey(AuxArray("XT", 'c', 1, 0)),
                              ValueKey(AuxZ("XT", "")),
                              ValueKey(AuxDouble("XT", -kInf)),
                              ValueKey(AuxInt("XT", 'i', INT32_MIN))};
  for (size_t i = 0; i + 1 < 6; ++i) EXPECT_LT(keys[i], keys[i + 1]) << i;
}

TEST(TagKey, NaNSortsAfterEveryNumberAndTiesWithNaN) {
  const std::string nan = ValueKey(AuxFloat("XT", static_cast<float>(kNaN)));
  EXPECT_LT(ValueKey(AuxDouble("XT", kInf)), nan);
  EXPECT_LT(ValueKey(AuxInt("XT", 'I', UINT32_MAX)), nan);
  EXPECT_EQ(ValueKey(AuxDouble("XT", -kNaN)), nan);
  EXPECT_EQ(ValueKey(AuxDouble("XT", kNaN)), nan);
}

TEST(TagKey, NegativeZeroEqualsZeroOfEveryType) {
  const std::string zero = ValueKey(AuxInt("XT", 'i', 0));
  EXPECT_EQ(ValueKey(AuxFloat("XT", -0.0f)), zero);
  EXPECT_EQ(ValueKey(AuxDouble("XT", -0.0)), zero);
  EXPECT_EQ(ValueKey(AuxInt("XT", 'C', 0)), zero);
}

TEST(TagKey, IntegersAndFloatsCompareByValue) {
  EXPECT_EQ(ValueKey(AuxInt("XT", 'c', 5)), ValueKey(AuxFloat("XT", 5.0f)));
  EXPECT_EQ(ValueKey(AuxInt("XT", 'I', UINT32_MAX)), ValueKey(AuxDouble("XT", 4294967295.0)));
  EXPECT_LT(ValueKey(AuxInt("XT", 'I', UINT32_MAX - 1)), ValueKey(AuxInt("XT", 'I', UINT32_MAX)));
  EXPECT_LT(ValueKey(AuxInt("XT", 'C', 255)), ValueKey(AuxFloat("XT", 255.5f)));
  EXPECT_LT(ValueKey(AuxDouble("XT", -1e300)), ValueKey(AuxInt("XT", 'i', INT32_MIN)));
  EXPECT_LT(ValueKey(AuxInt("XT", 's', -3)), ValueKey(AuxFloat("XT", -2.5f)));
}

TEST(TagKey, ArrayContentsAreIgnored) {
  EXPECT_EQ(ValueKey(AuxArray("XT", 'c', 2, 1)), ValueKey(AuxArray("XT", 'I', 0, 0)));
  EXPECT_EQ(ValueKey(AuxArray("XT", 'f', 3, 7)), ValueKey(AuxArray("XT", 'C', 1, 0)));
}

TEST(TagKey, StringsCompareAsStrcmpWithPrefixFirstAndHEqualsZ) {
  EXPECT_LT(ValueKey(AuxZ("XT", "ab")), ValueKey(AuxZ("XT", "abc")));
  EXPECT_LT(ValueKey(AuxZ("XT", "abc")), ValueKey(AuxZ("XT", "abd")));
  EXPECT_LT(ValueKey(AuxZ("XT", "z")), ValueKey(AuxZ("XT", "\x80")));  // Unsigned bytes.
  EXPECT_EQ(ValueKey(AuxZ("XT", "1A", 'H')), ValueKey(AuxZ("XT", "1A")));
}

TEST(TagKey, CharValuesCompareUnsigned) {
  EXPECT_LT(ValueKey(AuxA("XT", 'z')), ValueKey(AuxA("XT", 0x80)));
}

TEST(TagKey, LayoutIsPinned) {
  const std::unique_ptr<KeyEncoder> encoder = Encoder(OrderKind::kCoordinate, true);
  RecordSpec spec;
  spec.tid = 1;
  spec.pos = 99;
  spec.cigar = "10M";
  spec.flag = BAM_FREVERSE;
  spec.aux = AuxInt("XT", 'i', -1);
  const std::string key = KeyOf(*encoder, *MakeRecord(spec), 0x0102);
  // Class 4; -1.0 = 0xBFF0000000000000 inverted; tid 1; pos + 1 = 100;
  // reverse; seq.
  const std::string expected(
      "\x04"
      "\x40\x0f\xff\xff\xff\xff\xff\xff"
      "\x00\x00\x00\x01"
      "\x00\x00\x00\x64"
      "\x01"
      "\x00\x00\x00\x00\x00\x00\x01\x02",
      26);
  EXPECT_EQ(key, expected);
}

// htslib's bam_aux_get on malformed aux data: the walk stops (and the tag is
// "missing") at an unknown type, a truncated value, an array running past the
// record, or a Z/H value without its NUL. FindAux must agree pointer for
// pointer with the linked htslib on random, mostly broken aux blocks.
TEST(TagKey, AuxLookupAgreesWithHtslibOnMalformedAux) {
  const int saved = hts_get_log_level();
  hts_set_log_level(HTS_LOG_OFF);
  std::mt19937_64 rng(5);
  static const char* kTags[] = {"XT", "XA", "AS"};
  static const std::string kTypes("AcCsSiIfdZHBq", 13);
  int found = 0, missing = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    RecordSpec spec;
    spec.flag = BAM_FUNMAP;
    const int fields = static_cast<int>(rng() % 4);
    for (int f = 0; f < fields; ++f) {
      const char* tag = kTags[rng() % 3];
      spec.aux += std::string(tag, 2);
      if (rng() % 8 == 0) continue;  // Truncated right after the tag.
      const char type = kTypes[rng() % kTypes.size()];
      spec.aux.push_back(type);
      const size_t payload = rng() % 4 == 0 ? rng() % 12 : 0;
      if (type == 'B' && rng() % 2 == 0) {
        spec.aux.push_back("cCsSiIfZA"[rng() % 9]);
        const uint32_t n = rng() % 3 == 0 ? 0xFFFFFFFFu - rng() % 4 : rng() % 4;
        spec.aux.append(reinterpret_cast<const char*>(&n), 4);
      }
      for (size_t i = 0; i < payload || (payload == 0 && rng() % 2 == 0 && i < 4); ++i) {
        spec.aux.push_back(rng() % 3 == 0 ? '\0' : static_cast<char>('a' + rng() % 3));
      }
    }
    const BamPtr record = MakeRecord(spec);
    for (const char* tag : kTags) {
      const uint8_t* ours = internal::FindAux(*record, tag);
      const uint8_t* htslib = bam_aux_get(record.get(), tag);
      ASSERT_EQ(ours, htslib) << "trial " << trial << " tag " << tag;
      (ours != nullptr ? found : missing)++;
    }
  }
  hts_set_log_level(static_cast<htsLogLevel>(saved));
  EXPECT_GT(found, 1000);
  EXPECT_GT(missing, 1000);
}

TEST(TagKey, MalformedValueSortsAsMissingTag) {
  const std::string missing = ValueKey("");
  EXPECT_EQ(ValueKey(std::string("XTZab", 5)), missing);            // No NUL.
  EXPECT_EQ(ValueKey(std::string("XTi\x01\x02", 5)), missing);      // Truncated.
  EXPECT_EQ(ValueKey(std::string("XTq\x01\x02\x03", 6)), missing);  // Unknown type.
  // A broken field before the tag hides it, as in htslib.
  EXPECT_EQ(ValueKey(std::string("AAq\x01", 4) + AuxInt("XT", 'i', 5)), missing);
  EXPECT_EQ(ValueKey(AuxArray("XA", 'i', 1, 0).substr(0, 8) + AuxInt("XT", 'i', 5)), missing);
}

TEST(TagKey, StringsLongerThanTheBoundStillSortExactly) {
  const std::unique_ptr<KeyEncoder> encoder = Encoder(OrderKind::kCoordinate, true);
  const std::string long_a(internal::kBoundedTagStringBytes + 500, 'a');
  const std::string shorter = ValueKey(AuxZ("XT", long_a));
  const std::string longer = ValueKey(AuxZ("XT", long_a + "a"));
  EXPECT_GT(longer.size(), encoder->max_key_bytes());
  EXPECT_LT(shorter, longer);
  EXPECT_LT(longer, ValueKey(AuxZ("XT", long_a + "b")));
  RecordSpec spec;
  spec.flag = BAM_FUNMAP;
  spec.aux = AuxZ("XT", std::string(internal::kBoundedTagStringBytes, 'z'));
  EXPECT_LE(KeyOf(*encoder, *MakeRecord(spec), 0).size(), encoder->max_key_bytes());
}

TEST(TagKey, MaxKeyBytesPerSecondaryOrder) {
  EXPECT_EQ(Encoder(OrderKind::kCoordinate, true)->max_key_bytes(), 1 + 1025 + 9 + 8u);
  EXPECT_EQ(Encoder(OrderKind::kQueryName, true)->max_key_bytes(), 1 + 1025 + 510 + 8u);
  EXPECT_EQ(Encoder(OrderKind::kQueryName, false)->max_key_bytes(), 1 + 1025 + 256 + 8u);
}

TEST(TagKey, PositionOutsideBamIsRefusedWithoutAppending) {
  const std::unique_ptr<KeyEncoder> encoder = Encoder(OrderKind::kCoordinate, true);
  RecordSpec spec;
  spec.tid = 0;
  spec.pos = 5;
  spec.cigar = "1M";
  BamPtr record = MakeRecord(spec);
  record->core.pos = kMaxPosition + 1;
  std::string key = "prefix";
  EXPECT_EQ(encoder->Append(*record, 0, &key).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(key, "prefix");
}

}  // namespace
}  // namespace rocksort::keycodec
