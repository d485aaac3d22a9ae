// libFuzzer target for src/keycodec: the coordinate key is the contract
// between the loader and the store, so every property the sort relies on is checked
// here on fuzzer-chosen keys, not only on the hand-picked ones of
// keycodec_test.cc:
//
//   * DecodeCoordinateKey never crashes, whatever the bytes; it fails exactly
//     when the length is not kCoordinateKeySize, and a decoded key that passes
//     CheckCoordinate re-encodes to the same 16 bytes (decode is a left
//     inverse of encode);
//   * CheckCoordinate accepts exactly tid >= -1 and -1 <= pos <= kMaxPosition;
//   * for two valid keys, encode -> decode is the identity and the memcmp
//     order of the encodings is SamtoolsCoordinateLess (and equality).
//
// A violated property calls __builtin_trap(), which libFuzzer reports as a
// crash and saves the input.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/string_view.h"
#include "fuzzer/FuzzedDataProvider.h"
#include "keycodec/keycodec.h"

namespace rocksort::keycodec {
namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

int Sign(int v) { return (v > 0) - (v < 0); }

// Decoding arbitrary bytes, of any length.
void CheckDecodeRaw(absl::string_view bytes) {
  const absl::StatusOr<CoordinateKey> key = DecodeCoordinateKey(bytes);
  Check(key.ok() == (bytes.size() == kCoordinateKeySize));
  if (!key.ok() || !CheckCoordinate(key->tid, key->pos).ok()) return;
  char encoded[kCoordinateKeySize];
  EncodeCoordinateKey(*key, encoded);
  Check(std::memcmp(encoded, bytes.data(), kCoordinateKeySize) == 0);
}

// Positions mostly near the edges of the valid range, where off-by-one and
// sign mistakes live, sometimes anywhere in int64.
int64_t ConsumePosition(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return in.ConsumeIntegralInRange<int64_t>(-3, 64);
    case 1:
      return kMaxPosition + in.ConsumeIntegralInRange<int64_t>(-64, 3);
    case 2:
      return in.ConsumeIntegralInRange<int64_t>(-1, kMaxPosition);
    default:
      return in.ConsumeIntegral<int64_t>();
  }
}

int32_t ConsumeTid(FuzzedDataProvider& in) {
  return in.ConsumeBool() ? in.ConsumeIntegralInRange<int32_t>(-3, 64)
                          : in.ConsumeIntegral<int32_t>();
}

CoordinateKey ConsumeKey(FuzzedDataProvider& in) {
  CoordinateKey key;
  key.tid = ConsumeTid(in);
  key.pos = ConsumePosition(in);
  key.reverse = in.ConsumeBool();
  key.seq = in.ConsumeIntegral<uint64_t>() & kMaxSequence;  // The REQUIRES.
  return key;
}

// A second key that shares a fuzzer-chosen subset of fields with `a`, so
// that every tie-breaking level of the order is reached.
CoordinateKey ConsumeRelatedKey(FuzzedDataProvider& in, const CoordinateKey& a) {
  const uint8_t same = in.ConsumeIntegral<uint8_t>();
  CoordinateKey b = ConsumeKey(in);
  if (same & 1) b.tid = a.tid;
  if (same & 2) b.pos = a.pos;
  if (same & 4) b.reverse = a.reverse;
  if (same & 8) b.seq = a.seq;
  return b;
}

// Returns whether `key` is valid; if so, checks the round trip and writes the
// encoding to `out`.
bool CheckKey(const CoordinateKey& key, char* out) {
  const bool valid = CheckCoordinate(key.tid, key.pos).ok();
  Check(valid == (key.tid >= -1 && key.pos >= -1 && key.pos <= kMaxPosition));
  if (!valid) return false;  // Encoding it would violate the REQUIRES.
  EncodeCoordinateKey(key, out);
  const absl::StatusOr<CoordinateKey> decoded =
      DecodeCoordinateKey(absl::string_view(out, kCoordinateKeySize));
  Check(decoded.ok() && *decoded == key);
  return true;
}

void FuzzOne(const uint8_t* data, size_t size) {
  const absl::string_view raw(reinterpret_cast<const char*>(data), size);
  CheckDecodeRaw(raw);
  CheckDecodeRaw(raw.substr(0, kCoordinateKeySize));

  FuzzedDataProvider in(data, size);
  const CoordinateKey a = ConsumeKey(in);
  const CoordinateKey b = ConsumeRelatedKey(in, a);
  char ea[kCoordinateKeySize];
  char eb[kCoordinateKeySize];
  if (!CheckKey(a, ea) || !CheckKey(b, eb)) return;

  const int by_bytes = Sign(std::memcmp(ea, eb, kCoordinateKeySize));
  const bool a_less = SamtoolsCoordinateLess(a, b);
  const bool b_less = SamtoolsCoordinateLess(b, a);
  Check(!(a_less && b_less));  // A strict order is asymmetric.
  const int by_samtools = a_less ? -1 : b_less ? 1 : 0;
  Check(by_bytes == by_samtools);
  // Keys that compare equal must be the same key: the order is total, with
  // the sequence number as the final tie-breaker.
  Check((by_bytes == 0) == (a == b));
}

}  // namespace
}  // namespace rocksort::keycodec

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rocksort::keycodec::FuzzOne(data, size);
  return 0;
}
