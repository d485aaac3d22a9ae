// File: test/keycodec/test_records.h
// -----------------------------------------------------------------------------
// Test-only helpers for the keycodec suites: BAM records built in memory
// (any flag, position, CIGAR and raw aux bytes, including malformed ones),
// aux values in their BAM encoding, and a stable sort of records by the keys
// of an encoder. Records carry no SEQ/QUAL: no sort order reads them.
#ifndef ROCKSORT_TEST_KEYCODEC_TEST_RECORDS_H_
#define ROCKSORT_TEST_KEYCODEC_TEST_RECORDS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "htslib/sam.h"
#include "keycodec/keycodec.h"

namespace rocksort::keycodec::test_util {

struct BamDeleter {
  void operator()(bam1_t* b) const { bam_destroy1(b); }
};
using BamPtr = std::unique_ptr<bam1_t, BamDeleter>;

struct HeaderDeleter {
  void operator()(sam_hdr_t* h) const { sam_hdr_destroy(h); }
};
using HeaderPtr = std::unique_ptr<sam_hdr_t, HeaderDeleter>;

struct RecordSpec {
  std::string name = "r";
  uint16_t flag = 0;
  int32_t tid = -1;
  int64_t pos = -1;
  std::string cigar;  // SAM text, e.g. "5S10M"; empty for none.
  int32_t mtid = -1;
  int64_t mpos = -1;
  std::string aux;  // Raw BAM aux bytes (see the Aux* helpers).
};

// The record of `spec`; aborts the test binary if htslib refuses it.
BamPtr MakeRecord(const RecordSpec& spec);

// CIGAR text to BAM operations ("" -> none). REQUIRES: well-formed text.
std::vector<uint32_t> ParseCigar(const std::string& text);

// One aux field in BAM encoding: tag, type, value.
std::string AuxA(const char* tag, uint8_t c);
std::string AuxZ(const char* tag, const std::string& s, char type = 'Z');
std::string AuxInt(const char* tag, char type, int64_t v);  // c C s S i I
std::string AuxFloat(const char* tag, float v);
std::string AuxDouble(const char* tag, double v);
// B array of `count` elements of `subtype` (c C s S i I f), all zero bytes
// except the first element set to `first`.
std::string AuxArray(const char* tag, char subtype, uint32_t count, int first);

// A header parsed from SAM header text.
HeaderPtr ParseHeader(const std::string& text);

// The key of `record` as the `seq`-th input record; fails the test if Append
// fails.
std::string KeyOf(const KeyEncoder& encoder, const bam1_t& record, uint64_t seq);

}  // namespace rocksort::keycodec::test_util

#endif  // ROCKSORT_TEST_KEYCODEC_TEST_RECORDS_H_
