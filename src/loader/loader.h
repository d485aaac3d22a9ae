// File: loader/loader.h
// -----------------------------------------------------------------------------
// Reads alignment records (SAM text, BAM, SAM.gz or CRAM: whatever htslib
// reads) from a file or stdin, in batches: each record is keyed
// (keycodec::KeyEncoder, with its input index as the last field), encoded
// as it is stored (record::EncodeRecord) and handed to a
// record::KeyedRecordSink, the temporary store's writer. The loader knows
// nothing of what the sink does with them.
//
// Owns: the htsFile and header of the input (Input). Does not own the sink.
// Thread-safety: an Input and its RecordReader are used by one thread;
// htslib runs its own decode threads behind them.
#ifndef ROCKSORT_LOADER_LOADER_H_
#define ROCKSORT_LOADER_LOADER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/record_checksum.h"
#include "htslib/sam.h"
#include "keycodec/keycodec.h"
#include "record/record.h"

namespace rocksort::loader {

class SequentialReadahead;  // readahead_internal.h

// An opened alignment input and its header.
class Input {
 public:
  // Opens `path` ("-" for stdin) and reads its header. With `threads` > 1,
  // BGZF-compressed input (BAM, SAM.gz) is decompressed by that many htslib
  // threads, and CRAM decoded by them; SAM text is always parsed here, in the
  // calling thread, because htslib's multithreaded SAM parser reports errors
  // late and at the wrong record. NotFound when the file does not
  // exist, InvalidArgument when it is not an alignment format htslib knows,
  // DataLoss when the header is truncated or corrupt. A regular file is
  // read ahead (SequentialReadahead) in requests of `readahead_chunk` bytes;
  // the pipeline passes whole requests of the input's device. A non-empty
  // `reference` (FASTA, indexed or not) decodes CRAM, or supplies the @SQ
  // lines of SAM text without them; InvalidArgument when htslib can't use it.
  static absl::StatusOr<std::unique_ptr<Input>> Open(const std::string& path, int threads,
                                                     uint64_t readahead_chunk = uint64_t{2} << 20,
                                                     const std::string& reference = "");

  Input(const Input&) = delete;
  Input& operator=(const Input&) = delete;
  ~Input();

  // The input's header as read. Owned by this Input.
  const sam_hdr_t& header() const { return *header_; }
  sam_hdr_t* mutable_header() { return header_; }  // htslib wants non-const.
  // "stdin" or the path, for messages.
  const std::string& name() const { return name_; }
  // The open file, positioned after the header. Owned by this Input.
  htsFile* file() { return file_; }
  // The path as given ("-" for stdin).
  const std::string& path() const { return path_; }
  // Whether htslib threads decode ahead of the reader.
  bool threaded() const { return threaded_; }

 private:
  Input(std::string path, std::string name, htsFile* file, sam_hdr_t* header, bool threaded);

  std::string path_;  // As given; "-" for stdin.
  std::string name_;
  htsFile* file_;      // Owned; closed in the destructor.
  sam_hdr_t* header_;  // Owned; destroyed in the destructor.
  // Decompression runs ahead in htslib threads. Their errors surface late
  // (records already queued are dropped), so on a read error RecordReader
  // re-reads a regular file single-threaded to name the exact record.
  bool threaded_;
  // Regular files only: reads the file ahead in large requests.
  std::unique_ptr<SequentialReadahead> readahead_;
};

// Estimates the uncompressed BAM size of the input at `path` from its file
// size and the compression ratio of its first blocks (up to 8 MiB of data).
// Returns 0 when it cannot tell (stdin, a pipe, CRAM, an unreadable file). SAM text
// is counted 1:1 (BAM encoding is smaller, so this overestimates, which the
// compaction policy prefers to underestimating).
uint64_t EstimateUncompressedSize(const std::string& path);

struct LoadStats {
  uint64_t records = 0;       // Records written to the DB.
  uint64_t record_bytes = 0;  // Sum of their BAM encodings (uncompressed).
  uint64_t checksum = 0;      // RecordChecksum of their BAM encodings.
  // The input ended without its end-of-file marker (BGZF EOF block, CRAM
  // EOF container): it may be truncated at a block boundary, which no read
  // error reveals. The records it held are still valid and were loaded (as
  // samtools does); the caller warns.
  bool missing_eof_marker = false;
};

// Reads the records of an Input in batches.
class RecordReader {
 public:
  // Reads from `input` and keys records with `keys`; both must outlive
  // this reader. The first record gets input index `first_seq`.
  RecordReader(Input& input, const keycodec::KeyEncoder& keys, uint64_t first_seq = 0);

  // Reads records and adds each, with its key, to `sink` until the records
  // and keys added hold at least `max_bytes` or the input ends. Returns the
  // number added: 0 once the input has ended.
  // Errors: DataLoss for truncated or corrupt input, InvalidArgument for a
  // record BAM cannot hold or the order cannot key, and whatever the sink
  // returns. Each message names the input and the 1-based record number.
  absl::StatusOr<size_t> ReadBatch(size_t max_bytes, record::KeyedRecordSink& sink);

  // What was read so far; complete once ReadBatch returned 0.
  const LoadStats& stats() const { return stats_; }

 private:
  absl::Status ReadError(int code);

  Input& input_;
  const keycodec::KeyEncoder& keys_;
  const uint64_t first_seq_;
  LoadStats stats_;
  RecordChecksum checksum_;
  bool ended_ = false;
  // Virtual offset of the next record (BGZF input), for locating a read
  // error the decode threads reported late; -1 without offsets.
  int64_t next_offset_ = -1;
  std::unique_ptr<bam1_t, void (*)(bam1_t*)> record_;
  record::EncodedRecord encoded_;
  std::string key_;
};

// Bytes per readahead request of an input file (SequentialReadahead): up to
// 2 MiB, made of whole device requests (`request_bytes`: 2 x 1016 KiB on a
// virtio disk, where 2 MiB would be three requests, the third of 16 KiB),
// and no more than the kernel reads for one POSIX_FADV_WILLNEED
// (`max_read_bytes`, max_sectors_kb: it truncates a longer one, which would
// leave a hole that the reader then reads in small requests). 0 = unknown,
// for either. See common/disk_info.h.
uint64_t InputReadaheadChunk(uint64_t request_bytes, uint64_t max_read_bytes);

}  // namespace rocksort::loader

#endif  // ROCKSORT_LOADER_LOADER_H_
