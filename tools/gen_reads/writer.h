// Output: the SAM header, and records built from their fields and
// BAM-encoded aux data, written through htslib.
//
// Internal to tools/gen_reads/.
#ifndef ROCKSORT_TOOLS_GEN_READS_WRITER_H_
#define ROCKSORT_TOOLS_GEN_READS_WRITER_H_

#include <htslib/sam.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common.h"
#include "options.h"
#include "reference.h"

namespace rocksort {
namespace gen_reads {

// Aux fields, encoded straight into BAM binary form. Integers use the
// smallest type that holds them, as htslib does when it parses SAM text.
class AuxBuilder {
 public:
  void Clear() { data_.clear(); }
  const uint8_t* data() const { return data_.data(); }
  size_t size() const { return data_.size(); }

  void AddInt(const char tag[2], int64_t v) {
    PutTag(tag);
    if (v >= 0) {
      if (v <= 0xff) {
        data_.push_back('C');
        PutLe(v, 1);
      } else if (v <= 0xffff) {
        data_.push_back('S');
        PutLe(v, 2);
      } else {
        data_.push_back('I');
        PutLe(v, 4);
      }
    } else {
      if (v >= -128) {
        data_.push_back('c');
        PutLe(v, 1);
      } else if (v >= -32768) {
        data_.push_back('s');
        PutLe(v, 2);
      } else {
        data_.push_back('i');
        PutLe(v, 4);
      }
    }
  }
  void AddString(const char tag[2], std::string_view s) {
    PutTag(tag);
    data_.push_back('Z');
    data_.insert(data_.end(), s.begin(), s.end());
    data_.push_back('\0');
  }
  void AddInt32Array(const char tag[2], const std::vector<int32_t>& values) {
    PutTag(tag);
    data_.push_back('B');
    data_.push_back('i');
    PutLe(static_cast<int64_t>(values.size()), 4);
    for (int32_t v : values) PutLe(v, 4);
  }

 private:
  void PutTag(const char tag[2]) {
    data_.push_back(static_cast<uint8_t>(tag[0]));
    data_.push_back(static_cast<uint8_t>(tag[1]));
  }
  // BAM is little-endian regardless of the host.
  void PutLe(int64_t v, int bytes) {
    const uint64_t u = static_cast<uint64_t>(v);
    for (int i = 0; i < bytes; ++i) {
      data_.push_back(static_cast<uint8_t>(u >> (8 * i)));
    }
  }

  std::vector<uint8_t> data_;
};

struct SamFileCloser {
  void operator()(samFile* f) const {
    if (f != nullptr) sam_close(f);
  }
};
struct HeaderFreer {
  void operator()(sam_hdr_t* h) const { sam_hdr_destroy(h); }
};
struct BamFreer {
  void operator()(bam1_t* b) const { bam_destroy1(b); }
};

// Everything that varies between the fields of one record except aux.
struct RecordFields {
  std::string_view name;
  uint16_t flag = 0;
  int32_t tid = -1;
  int64_t pos = -1;
  uint8_t mapq = 0;
  const std::vector<uint32_t>* cigar = nullptr;  // null: '*'
  int32_t mtid = -1;
  int64_t mpos = -1;
  int64_t tlen = 0;
  std::string_view seq;   // empty: '*'
  std::string_view qual;  // empty: '*'; else seq.size() raw Phred values
};

// Output: one samFile, one reusable bam1_t. Not thread-safe.
class Writer {
 public:
  // Opens opts.output (BAM or SAM by its name) and writes `header`, which
  // must outlive the writer.
  Status Open(const Options& opts, sam_hdr_t* header);

  // Writes one record: the fields of `f` and the aux data of `aux`.
  Status Write(const RecordFields& f, const AuxBuilder& aux);

  // Bytes of output so far: compressed bytes for BAM, text bytes for SAM.
  // For BAM this flushes the current BGZF block and waits for the
  // compression threads: with -@ the BGZF offset only advances on a flush,
  // and flushing at the same record on every run keeps the block layout,
  // and so the output, independent of the thread count.
  Status OutputBytes(uint64_t* bytes);

  // A failed close means the file is incomplete: report it.
  Status Close();

  uint64_t records() const { return records_; }

 private:
  std::string name_;
  sam_hdr_t* header_ = nullptr;  // not owned
  bool is_bam_ = false;
  uint64_t text_bytes_ = 0;
  uint64_t records_ = 0;
  std::unique_ptr<samFile, SamFileCloser> fp_;
  std::unique_ptr<bam1_t, BamFreer> bam_;
};

// The header: @HD, an @SQ line per reference, the read group and an @PG
// line with the command line.
Status BuildHeader(const Options& opts, const Reference& ref,
                   std::unique_ptr<sam_hdr_t, HeaderFreer>* out);

}  // namespace gen_reads
}  // namespace rocksort

#endif  // ROCKSORT_TOOLS_GEN_READS_WRITER_H_
