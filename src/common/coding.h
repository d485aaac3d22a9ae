// File: common/coding.h
// -----------------------------------------------------------------------------
// Fixed-width integer encodings, in the two byte orders rocksort writes:
//
//   * big-endian (Put/GetBigEndian*): sort keys. Most significant byte
//     first, so that memcmp of two encodings (RocksDB's bytewise comparator)
//     compares the unsigned values; keycodec biases signed fields first.
//   * little-endian (Put/GetLittleEndian*): the BAM format, the BGZF
//     framing and htslib's index offsets (SAM/BAM spec 4.2: "all integers
//     are little-endian").
//
// Every Put writes exactly sizeof(T) bytes at `out`; every Get reads that
// many at `in`. REQUIRES: the buffer holds them. No alignment is needed.
// Pure functions; thread-safe.
#ifndef ROCKSORT_COMMON_CODING_H_
#define ROCKSORT_COMMON_CODING_H_

#include <cstdint>
#include <cstring>
#include <string>

namespace rocksort {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "rocksort writes BAM with host-order stores: little-endian hosts only");

inline void PutLittleEndian16(uint16_t v, char* out) { std::memcpy(out, &v, 2); }
inline void PutLittleEndian32(uint32_t v, char* out) { std::memcpy(out, &v, 4); }
inline uint16_t GetLittleEndian16(const char* in) {
  uint16_t v;
  std::memcpy(&v, in, 2);
  return v;
}
inline uint32_t GetLittleEndian32(const char* in) {
  uint32_t v;
  std::memcpy(&v, in, 4);
  return v;
}
inline uint64_t GetLittleEndian64(const char* in) {
  uint64_t v;
  std::memcpy(&v, in, 8);
  return v;
}
inline void AppendLittleEndian32(uint32_t v, std::string* out) {
  char b[4];
  PutLittleEndian32(v, b);
  out->append(b, 4);
}

inline void PutBigEndian16(uint16_t v, char* out) {
  v = __builtin_bswap16(v);
  std::memcpy(out, &v, 2);
}
inline void PutBigEndian32(uint32_t v, char* out) {
  v = __builtin_bswap32(v);
  std::memcpy(out, &v, 4);
}
inline void PutBigEndian64(uint64_t v, char* out) {
  v = __builtin_bswap64(v);
  std::memcpy(out, &v, 8);
}
inline uint32_t GetBigEndian32(const char* in) {
  uint32_t v;
  std::memcpy(&v, in, 4);
  return __builtin_bswap32(v);
}
inline uint64_t GetBigEndian64(const char* in) {
  uint64_t v;
  std::memcpy(&v, in, 8);
  return __builtin_bswap64(v);
}
inline void AppendBigEndian32(uint32_t v, std::string* out) {
  char b[4];
  PutBigEndian32(v, b);
  out->append(b, 4);
}
inline void AppendBigEndian64(uint64_t v, std::string* out) {
  char b[8];
  PutBigEndian64(v, b);
  out->append(b, 8);
}

}  // namespace rocksort

#endif  // ROCKSORT_COMMON_CODING_H_
