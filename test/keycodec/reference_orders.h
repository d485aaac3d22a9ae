// File: test/keycodec/reference_orders.h
// -----------------------------------------------------------------------------
// Reference comparators for the keycodec property tests, written from
// samtools 1.23.1's rules (SORT_ORDERS.md, bam_sort.c) and independent of the
// encoders: each returns <0, 0 or >0 like strcmp. The tests check that memcmp
// on encoded keys agrees with them.
#ifndef ROCKSORT_TEST_KEYCODEC_REFERENCE_ORDERS_H_
#define ROCKSORT_TEST_KEYCODEC_REFERENCE_ORDERS_H_

#include <cstdint>
#include <string>

namespace rocksort::keycodec::test_util {

inline int Sign(int v) { return (v > 0) - (v < 0); }

// Natural name order from the token rules: tokens are single non-digit bytes
// or maximal ASCII digit runs; two runs compare by value (leading zeros do
// not count: equal values tie); otherwise the bytes at the token starts
// compare unsigned (a run by its first digit); a token prefix is smaller.
int TokenRulesCompare(const std::string& a, const std::string& b);

// The same order computed the way samtools' strnum_cmp walks two C strings
// (skip both runs' zeros, skip the common digits, note the first differing
// byte, then the longer run wins, else that byte decides), restated here so
// that the token rules are checked against the algorithm too.
int StrnumWalkCompare(const std::string& a, const std::string& b);

// The flag tie-break of the name orders: READ1/READ2 (neither < READ1 <
// READ2 < both), then primary < supplementary < secondary < both.
int FlagCompare(uint16_t a, uint16_t b);

}  // namespace rocksort::keycodec::test_util

#endif  // ROCKSORT_TEST_KEYCODEC_REFERENCE_ORDERS_H_
