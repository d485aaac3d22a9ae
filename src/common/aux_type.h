// File: common/aux_type.h
// -----------------------------------------------------------------------------
// The BAM aux value types (SAM/BAM spec 4.2.4), shared by the record view
// (record/) and the tag keys (keycodec/), which both walk aux data.
#ifndef ROCKSORT_COMMON_AUX_TYPE_H_
#define ROCKSORT_COMMON_AUX_TYPE_H_

#include <cstddef>

namespace rocksort {

// The size in bytes of one value of the fixed-size aux type `type` (A, c, C,
// s, S, i, I, f, d); 0 for Z, H, B and unknown types. Pure; thread-safe.
constexpr size_t FixedAuxSize(char type) {
  switch (type) {
    case 'A':
    case 'c':
    case 'C':
      return 1;
    case 's':
    case 'S':
      return 2;
    case 'i':
    case 'I':
    case 'f':
      return 4;
    case 'd':
      return 8;
    default:
      return 0;
  }
}

}  // namespace rocksort

#endif  // ROCKSORT_COMMON_AUX_TYPE_H_
