// File: test/keycodec/test_records.cc
// -----------------------------------------------------------------------------
// In-memory BAM records and aux encodings for the keycodec tests.
#include "keycodec/test_records.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"

namespace rocksort::keycodec::test_util {
namespace {

std::string TagBytes(const char* tag, char type) { return {tag[0], tag[1], type}; }

template <typename T>
std::string LittleEndian(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

}  // namespace

std::vector<uint32_t> ParseCigar(const std::string& text) {
  static const std::string kOps = BAM_CIGAR_STR;
  std::vector<uint32_t> ops;
  uint32_t len = 0;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      len = len * 10 + static_cast<uint32_t>(c - '0');
    } else {
      ops.push_back(bam_cigar_gen(len, kOps.find(c)));
      len = 0;
    }
  }
  return ops;
}

BamPtr MakeRecord(const RecordSpec& spec) {
  BamPtr b(bam_init1());
  const std::vector<uint32_t> cigar = ParseCigar(spec.cigar);
  if (bam_set1(b.get(), spec.name.size(), spec.name.c_str(), spec.flag, spec.tid, spec.pos, 60,
               cigar.size(), cigar.data(), spec.mtid, spec.mpos, 0, 0, nullptr, nullptr,
               spec.aux.size()) < 0) {
    std::fprintf(stderr, "bam_set1 refused record %s\n", spec.name.c_str());
    std::abort();
  }
  std::memcpy(b->data + b->l_data, spec.aux.data(), spec.aux.size());
  b->l_data += static_cast<int>(spec.aux.size());
  return b;
}

std::string AuxA(const char* tag, uint8_t c) { return TagBytes(tag, 'A') + static_cast<char>(c); }

std::string AuxZ(const char* tag, const std::string& s, char type) {
  return TagBytes(tag, type) + s + '\0';
}

std::string AuxInt(const char* tag, char type, int64_t v) {
  std::string out = TagBytes(tag, type);
  switch (type) {
    case 'c':
      return out + LittleEndian(static_cast<int8_t>(v));
    case 'C':
      return out + LittleEndian(static_cast<uint8_t>(v));
    case 's':
      return out + LittleEndian(static_cast<int16_t>(v));
    case 'S':
      return out + LittleEndian(static_cast<uint16_t>(v));
    case 'i':
      return out + LittleEndian(static_cast<int32_t>(v));
    default:
      return out + LittleEndian(static_cast<uint32_t>(v));
  }
}

std::string AuxFloat(const char* tag, float v) { return TagBytes(tag, 'f') + LittleEndian(v); }

std::string AuxDouble(const char* tag, double v) { return TagBytes(tag, 'd') + LittleEndian(v); }

std::string AuxArray(const char* tag, char subtype, uint32_t count, int first) {
  size_t size = 1;
  if (subtype == 's' || subtype == 'S') size = 2;
  if (subtype == 'i' || subtype == 'I' || subtype == 'f') size = 4;
  std::string values(size * count, '\0');
  if (count > 0) values[0] = static_cast<char>(first);
  return TagBytes(tag, 'B') + subtype + LittleEndian(count) + values;
}

HeaderPtr ParseHeader(const std::string& text) {
  return HeaderPtr(sam_hdr_parse(text.size(), text.c_str()));
}

std::string KeyOf(const KeyEncoder& encoder, const bam1_t& record, uint64_t seq) {
  std::string key;
  const absl::Status s = encoder.Append(record, seq, &key);
  EXPECT_TRUE(s.ok()) << bam_get_qname(&record) << ": " << s;
  return key;
}

}  // namespace rocksort::keycodec::test_util
