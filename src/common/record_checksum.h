// File: common/record_checksum.h
// -----------------------------------------------------------------------------
// An order-independent checksum of a multiset of records, computed once on
// the way into the temporary store (loader) and once on the way out (the
// pipeline's emit loop):
// if any record is lost, duplicated or altered in between, the sums differ
// and the run fails instead of writing a plausible but wrong BAM.
//
// Per record: h = Mix64(crc32(bytes) << 32 | length); the checksum is the sum
// of h modulo 2^64, so record order does not matter. crc32 is libdeflate's
// (PCLMUL-accelerated, >10 GB/s), which can be extended over a record given
// in several pieces. Cost: one extra read of each record's bytes at each end,
// measured in docs/benchmarks.md.
//
// Thread-compatible value type.
#ifndef ROCKSORT_COMMON_RECORD_CHECKSUM_H_
#define ROCKSORT_COMMON_RECORD_CHECKSUM_H_

#include <cstddef>
#include <cstdint>

#include "libdeflate.h"

namespace rocksort {

class RecordChecksum {
 public:
  // Adds one record given as consecutive pieces: call AddPiece for each piece,
  // then EndRecord.
  void AddPiece(const void* data, size_t size) {
    crc_ = libdeflate_crc32(crc_, data, size);
    length_ += size;
  }
  void EndRecord() {
    sum_ += Mix64(uint64_t{crc_} << 32 | static_cast<uint32_t>(length_));
    crc_ = 0;
    length_ = 0;
  }
  void AddRecord(const void* data, size_t size) {
    AddPiece(data, size);
    EndRecord();
  }

  uint64_t value() const { return sum_; }

 private:
  // splitmix64's finaliser: spreads the crc and length over all 64 bits so
  // that sums of different multisets rarely collide.
  static uint64_t Mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }

  uint32_t crc_ = 0;
  size_t length_ = 0;
  uint64_t sum_ = 0;
};

}  // namespace rocksort

#endif  // ROCKSORT_COMMON_RECORD_CHECKSUM_H_
