// File: test/keycodec/reference_orders.cc
// -----------------------------------------------------------------------------
// The reference comparators of reference_orders.h.
#include "keycodec/reference_orders.h"

#include <algorithm>

#include "htslib/sam.h"

namespace rocksort::keycodec::test_util {
namespace {

bool IsDigit(unsigned char c) { return c >= '0' && c <= '9'; }

}  // namespace

int TokenRulesCompare(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (IsDigit(a[i]) && IsDigit(b[j])) {
      size_t ei = i, ej = j;
      while (ei < a.size() && IsDigit(a[ei])) ++ei;
      while (ej < b.size() && IsDigit(b[ej])) ++ej;
      std::string va = a.substr(i, ei - i), vb = b.substr(j, ej - j);
      va.erase(0, std::min(va.find_first_not_of('0'), va.size()));
      vb.erase(0, std::min(vb.find_first_not_of('0'), vb.size()));
      if (va.size() != vb.size()) return va.size() < vb.size() ? -1 : 1;
      if (va != vb) return va < vb ? -1 : 1;
      i = ei;
      j = ej;
    } else {
      const unsigned char ca = a[i], cb = b[j];
      if (ca != cb) return ca < cb ? -1 : 1;
      ++i;
      ++j;
    }
  }
  if (i < a.size()) return 1;
  return j < b.size() ? -1 : 0;
}

int StrnumWalkCompare(const std::string& sa, const std::string& sb) {
  const unsigned char* a = reinterpret_cast<const unsigned char*>(sa.c_str());
  const unsigned char* b = reinterpret_cast<const unsigned char*>(sb.c_str());
  while (*a != 0 && *b != 0) {
    if (IsDigit(*a) && IsDigit(*b)) {
      while (*a == '0') ++a;
      while (*b == '0') ++b;
      while (IsDigit(*a) && *a == *b) ++a, ++b;
      const int first_difference = static_cast<int>(*a) - static_cast<int>(*b);
      while (IsDigit(*a) && IsDigit(*b)) ++a, ++b;
      if (IsDigit(*a)) return 1;
      if (IsDigit(*b)) return -1;
      if (first_difference != 0) return first_difference;
    } else {
      if (*a != *b) return static_cast<int>(*a) - static_cast<int>(*b);
      ++a;
      ++b;
    }
  }
  return *a != 0 ? 1 : (*b != 0 ? -1 : 0);
}

int FlagCompare(uint16_t a, uint16_t b) {
  auto pair_rank = [](uint16_t f) {
    return ((f & BAM_FREAD1) ? 1 : 0) + ((f & BAM_FREAD2) ? 2 : 0);
  };
  auto kind_rank = [](uint16_t f) {
    return ((f & BAM_FSUPPLEMENTARY) ? 1 : 0) + ((f & BAM_FSECONDARY) ? 2 : 0);
  };
  if (pair_rank(a) != pair_rank(b)) return pair_rank(a) < pair_rank(b) ? -1 : 1;
  if (kind_rank(a) != kind_rank(b)) return kind_rank(a) < kind_rank(b) ? -1 : 1;
  return 0;
}

}  // namespace rocksort::keycodec::test_util
