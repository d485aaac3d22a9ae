// File: test/keycodec/name_key_test.cc
// -----------------------------------------------------------------------------
// The -n / -N keys against reference comparators written here from the rules
// of samtools 1.23.1 (docs/key_format.md, SORT_ORDERS.md): exhaustively on
// short names over an alphabet that has every kind of byte that matters
// (digits 0, 1 and 9; '.' and '/' below the digits; ':' '_' 'a' above), and
// on random longer names built to collide, with every flag combination.
#include <algorithm>
#include <cstring>
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

using internal::AppendLexicographicName;
using internal::AppendNaturalName;
using test_util::FlagCompare;
using test_util::KeyOf;
using test_util::MakeRecord;
using test_util::RecordSpec;
using test_util::Sign;
using test_util::StrnumWalkCompare;
using test_util::TokenRulesCompare;

std::string NaturalKey(const std::string& name) {
  std::string key;
  AppendNaturalName(name, &key);
  return key;
}

std::string LexicographicKey(const std::string& name) {
  std::string key;
  AppendLexicographicName(name, &key);
  return key;
}

// Every string of length 0..max_len over `alphabet`.
std::vector<std::string> AllStrings(const std::string& alphabet, size_t max_len) {
  std::vector<std::string> out = {""};
  for (size_t begin = 0, len = 1; len <= max_len; ++len) {
    const size_t end = out.size();
    for (size_t i = begin; i < end; ++i) {
      for (char c : alphabet) out.push_back(out[i] + c);
    }
    begin = end;
  }
  return out;
}

// Names built to collide: digit runs with leading zeros and of every length
// up to 30 (beyond 64-bit integers), bytes on both sides of the digits,
// 0x01 and 0xFF, and names that extend or truncate earlier names.
std::vector<std::string> CollidingNames(std::mt19937_64& rng, size_t n) {
  static const std::string kBytes = std::string(".-/:_|~aAbz\x01\xff");
  std::vector<std::string> names;
  while (names.size() < n) {
    std::string name;
    if (!names.empty() && rng() % 3 == 0) {
      name = names[rng() % names.size()];
      if (rng() % 2 == 0) name.resize(rng() % (name.size() + 1));
    }
    const int tokens = static_cast<int>(rng() % 6);
    for (int t = 0; t < tokens; ++t) {
      if (rng() % 2 == 0) {
        name.append(rng() % 4 == 0 ? rng() % 4 : 0, '0');
        const size_t digits = rng() % 8 == 0 ? 1 + rng() % 30 : 1 + rng() % 3;
        for (size_t d = 0; d < digits; ++d) name.push_back(static_cast<char>('0' + rng() % 10));
      } else {
        name.push_back(kBytes[rng() % kBytes.size()]);
      }
    }
    if (name.size() > internal::kMaxNameLength) name.resize(internal::kMaxNameLength);
    names.push_back(name);
  }
  return names;
}

TEST(NameKey, TokenRulesAgreeWithSamtoolsWalkOnAllShortNames) {
  const std::vector<std::string> names = AllStrings("019./:_a", 4);
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t j = i + 1; j < names.size(); ++j) {
      ASSERT_EQ(Sign(TokenRulesCompare(names[i], names[j])),
                Sign(StrnumWalkCompare(names[i], names[j])))
          << '"' << names[i] << "\" vs \"" << names[j] << '"';
    }
  }
}

TEST(NameKey, NaturalMemcmpEqualsStrnumCmpOnEveryPairOfShortNames) {
  const std::vector<std::string> names = AllStrings("019./:_a", 4);
  ASSERT_EQ(names.size(), 4681u);
  std::vector<std::string> keys;
  for (const std::string& name : names) keys.push_back(NaturalKey(name));
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t j = i + 1; j < names.size(); ++j) {
      const int expected = Sign(StrnumWalkCompare(names[i], names[j]));
      const int actual = Sign(keys[i].compare(keys[j]));
      if (actual != expected) {
        FAIL() << '"' << names[i] << "\" vs \"" << names[j] << "\": key says " << actual
               << ", samtools " << expected;
      }
    }
  }
}

TEST(NameKey, LexicographicMemcmpEqualsStrcmpOnEveryPairOfShortNames) {
  const std::vector<std::string> names = AllStrings("019./:_a\xff", 3);
  for (const std::string& a : names) {
    for (const std::string& b : names) {
      ASSERT_EQ(Sign(LexicographicKey(a).compare(LexicographicKey(b))),
                Sign(std::strcmp(a.c_str(), b.c_str())))
          << a << " vs " << b;
    }
  }
}

TEST(NameKey, NaturalMemcmpEqualsStrnumCmpOnRandomCollidingNames) {
  std::mt19937_64 rng(7);
  const std::vector<std::string> names = CollidingNames(rng, 1500);
  std::vector<std::string> keys;
  for (const std::string& name : names) keys.push_back(NaturalKey(name));
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t j = 0; j < names.size(); ++j) {
      const int expected = Sign(TokenRulesCompare(names[i], names[j]));
      ASSERT_EQ(expected, Sign(StrnumWalkCompare(names[i], names[j])));
      ASSERT_EQ(Sign(keys[i].compare(keys[j])), expected)
          << '"' << names[i] << "\" vs \"" << names[j] << '"';
    }
  }
}

TEST(NameKey, LeadingZerosTieAsInSamtools) {
  EXPECT_EQ(NaturalKey("a01"), NaturalKey("a1"));
  EXPECT_EQ(NaturalKey("a001b"), NaturalKey("a1b"));
  EXPECT_EQ(NaturalKey("x0"), NaturalKey("x000"));
  EXPECT_LT(NaturalKey("a1"), NaturalKey("a01b"));
}

TEST(NameKey, DigitRunsCompareByValueBeyondSixtyFourBits) {
  EXPECT_LT(NaturalKey("r9"), NaturalKey("r10"));
  EXPECT_LT(NaturalKey("r99999999999999999999999"), NaturalKey("r100000000000000000000000"));
  EXPECT_LT(NaturalKey("r18446744073709551615"), NaturalKey("r18446744073709551616"));
}

TEST(NameKey, RunAgainstByteComparesAsItsFirstDigit) {
  EXPECT_LT(NaturalKey("a.1"), NaturalKey("a0"));  // '.' < digits
  EXPECT_LT(NaturalKey("a/"), NaturalKey("a0"));
  EXPECT_LT(NaturalKey("a99"), NaturalKey("a:"));  // ':' > digits
  EXPECT_LT(NaturalKey("a9"), NaturalKey("a_"));
  EXPECT_LT(NaturalKey("a"), NaturalKey("a0"));  // prefix first
}

TEST(NameKey, NaturalKeyLayoutIsPinned) {
  // "ab007c12": 'a' 'b', run "7" (1 significant digit), 'c', run "12", end.
  EXPECT_EQ(NaturalKey("ab007c12"), std::string("ab\x30\x01"
                                                "7c\x30\x02"
                                                "12\0",
                                                11));
}

TEST(NameKey, LongestNaturalNameFitsTheBound) {
  std::string name;
  while (name.size() < internal::kMaxNameLength) name += "1a";
  EXPECT_EQ(NaturalKey(name).size(), internal::kMaxNaturalNameBytes);
  name.assign(internal::kMaxNameLength, '9');
  EXPECT_LE(NaturalKey(name).size(), internal::kMaxNaturalNameBytes);
}

TEST(NameKey, FlagTieBreakOrdersReadThenSupplementaryThenSecondary) {
  absl::StatusOr<std::unique_ptr<KeyEncoder>> encoder =
      MakeKeyEncoder(SortOrder{OrderKind::kQueryName, true, ""}, *test_util::ParseHeader(""));
  ASSERT_TRUE(encoder.ok());
  // In samtools' order, each with noise bits that must not matter.
  const uint16_t in_order[] = {0x1 | 0x10,   0x800,        0x100 | 0x4,  0x900,
                               0x40 | 0x20,  0x40 | 0x800, 0x40 | 0x100, 0x80,
                               0x80 | 0x900, 0xC0 | 0x2,   0xC0 | 0x900};
  std::string previous;
  for (uint16_t flag : in_order) {
    RecordSpec spec;
    spec.name = "same";
    spec.flag = flag | BAM_FUNMAP;
    const std::string key = KeyOf(**encoder, *MakeRecord(spec), 99 - flag % 50);
    EXPECT_LT(previous, key) << "flag " << flag;
    previous = key;
  }
}

// Whole keys of records, both name orders: memcmp equals (name, flags, seq).
TEST(NameKey, MemcmpOrderEqualsSamtoolsOrderOnRandomRecords) {
  std::mt19937_64 rng(11);
  const std::vector<std::string> names = CollidingNames(rng, 120);
  for (bool natural : {true, false}) {
    absl::StatusOr<std::unique_ptr<KeyEncoder>> encoder =
        MakeKeyEncoder(SortOrder{OrderKind::kQueryName, natural, ""}, *test_util::ParseHeader(""));
    ASSERT_TRUE(encoder.ok());
    struct Item {
      std::string name;
      uint16_t flag;
      uint64_t seq;
      std::string key;
    };
    std::vector<Item> items;
    for (uint64_t seq = 0; seq < 1200; ++seq) {
      RecordSpec spec;
      spec.name = names[rng() % names.size()];
      if (spec.name.empty()) spec.name = "0";  // htslib would store "*".
      spec.flag = static_cast<uint16_t>(rng() & 0xFFF);
      spec.flag |= BAM_FUNMAP;
      const uint64_t s = rng() % 4 == 0 ? rng() % 1000 + (uint64_t{1} << 40) : seq;
      items.push_back({spec.name, spec.flag, s, KeyOf(**encoder, *MakeRecord(spec), s)});
      EXPECT_LE(items.back().key.size(), (*encoder)->max_key_bytes());
    }
    for (const Item& a : items) {
      for (const Item& b : items) {
        int expected = natural ? Sign(TokenRulesCompare(a.name, b.name))
                               : Sign(std::strcmp(a.name.c_str(), b.name.c_str()));
        if (expected == 0) expected = FlagCompare(a.flag, b.flag);
        if (expected == 0) expected = a.seq < b.seq ? -1 : (a.seq > b.seq ? 1 : 0);
        ASSERT_EQ(Sign(a.key.compare(b.key)), expected)
            << a.name << "/" << a.flag << " vs " << b.name << "/" << b.flag;
      }
    }
  }
}

TEST(NameKey, MaxKeyBytesIsTheLongestKey) {
  auto header = test_util::ParseHeader("");
  auto natural = MakeKeyEncoder(SortOrder{OrderKind::kQueryName, true, ""}, *header);
  auto lexicographic = MakeKeyEncoder(SortOrder{OrderKind::kQueryName, false, ""}, *header);
  ASSERT_TRUE(natural.ok() && lexicographic.ok());
  EXPECT_EQ((*natural)->max_key_bytes(), 518u);
  EXPECT_EQ((*lexicographic)->max_key_bytes(), 264u);
  RecordSpec spec;
  spec.flag = BAM_FUNMAP;
  spec.name.clear();
  while (spec.name.size() < internal::kMaxNameLength) spec.name += "1a";
  EXPECT_EQ(KeyOf(**natural, *MakeRecord(spec), 0).size(), 518u);
  EXPECT_EQ(KeyOf(**lexicographic, *MakeRecord(spec), 0).size(), 264u);
}

}  // namespace
}  // namespace rocksort::keycodec
