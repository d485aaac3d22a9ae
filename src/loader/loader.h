// File: loader/loader.h
// -----------------------------------------------------------------------------
// Reads alignment records (SAM text, BAM, SAM.gz or CRAM: whatever htslib
// reads) from a file or stdin and writes each one to the temporary RocksDB:
// key = keycodec coordinate key (with the record's input index as the
// tie-breaker), value = the record's exact BAM encoding (loader/bam_record.h).
// Writes go in large WriteBatches without WAL (the DB is scratch: a crash
// loses nothing that the input does not still hold).
//
// Owns: the htsFile and header of the input (Input). Does not own the DB.
// Thread-safety: an Input is used by one thread; htslib runs its own decode
// threads behind it.
#ifndef ROCKSORT_LOADER_LOADER_H_
#define ROCKSORT_LOADER_LOADER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "htslib/sam.h"
#include "loader/readahead.h"
#include "rocksdb/db.h"

namespace rocksort::loader {

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
                                                     uint64_t readahead_chunk = uint64_t{2}
                                                                                << 20,
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
  Input(std::string path, std::string name, htsFile* file, sam_hdr_t* header,
        bool threaded)
      : path_(std::move(path)), name_(std::move(name)), file_(file), header_(header),
        threaded_(threaded) {}

  std::string path_;   // As given; "-" for stdin.
  std::string name_;
  htsFile* file_;      // Owned; closed in the destructor.
  sam_hdr_t* header_;  // Owned; destroyed in the destructor.
  // Decompression runs ahead in htslib threads. Their errors surface late
  // (records already queued are dropped), so on a read error LoadRecords
  // re-reads a regular file single-threaded to name the exact record.
  bool threaded_;
  // Regular files only: reads the file ahead in large requests.
  std::unique_ptr<SequentialReadahead> readahead_;
};

struct LoadOptions {
  // A WriteBatch is written once it holds this many bytes. Large batches keep
  // the per-write cost of RocksDB (write thread hand-off, memtable switch
  // checks) negligible; the batch itself is reused, so this is also the
  // loader's own memory use.
  // Default: 4 MiB.
  size_t batch_bytes = size_t{4} << 20;

  // Column families to spread the records over ("lanes",
  // compaction_policy.h). Batches go to one lane until RocksDB seals that
  // lane's memtable (it was full: a sorted run is being flushed), then to the
  // next, so the lanes receive runs in turn. (RocksDB seals a full memtable
  // at the start of the next write, so the batch of that write starts the
  // lane's next run; at the end each lane may hold one such short run.)
  // Empty = the default column family only. Not owned.
  std::vector<rocksdb::ColumnFamilyHandle*> lanes;

  // Polled between batches; when it becomes true LoadRecords stops and
  // returns Cancelled. May be null.
  const std::atomic<bool>* cancelled = nullptr;

  // Called after every batch written, with the records loaded so far; an
  // error stops loading with that error. May be empty. The pipeline uses it
  // to switch compaction on adaptively and to sample temp disk usage.
  std::function<absl::Status(uint64_t records)> after_batch;
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

// Reads every remaining record of `input` and writes it to `db`.
// REQUIRES: `db` is open and empty, with a bytewise comparator.
// Errors: DataLoss for truncated or corrupt input, InvalidArgument for a
// record BAM cannot hold, Internal for a RocksDB failure (RocksDB's text),
// Cancelled when `options.cancelled` was set. Each message names the input
// and the 1-based record number.
absl::StatusOr<LoadStats> LoadRecords(Input& input, rocksdb::DB* db,
                                      const LoadOptions& options);

}  // namespace rocksort::loader

#endif  // ROCKSORT_LOADER_LOADER_H_
