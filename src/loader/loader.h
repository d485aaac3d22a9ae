// File: loader/loader.h
// -----------------------------------------------------------------------------
// Reads alignment records (SAM text, BAM, SAM.gz or CRAM: whatever htslib
// reads) from one or several files or stdin, in batches: each record is
// keyed (keycodec::KeyEncoder, with its input index as the last field),
// encoded as it is stored (record::EncodeRecord) and handed to a
// record::KeyedRecordSink, the temporary store's writer. The loader knows
// nothing of what the sink does with them.
//
// Several inputs (InputSet) are read one after the other as if they were
// one concatenated input: the input index runs on across files, so that
// equal keys keep file order, then record order. Their headers are
// combined as `samtools merge` combines them (header_merge_internal.h).
//
// Owns: the htsFile and header of each input (Input, InputSet). Does not
// own the sink. Thread-safety: an Input, an InputSet and their readers are
// used by one thread; htslib runs its own decode threads behind them. An
// InputSet's progress() may be read from any thread.
#ifndef ROCKSORT_LOADER_LOADER_H_
#define ROCKSORT_LOADER_LOADER_H_

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/hts_handles.h"
#include "common/record_checksum.h"
#include "htslib/sam.h"
#include "htslib/thread_pool.h"
#include "keycodec/keycodec.h"
#include "record/record.h"

namespace rocksort::loader {

class SequentialReadahead;  // readahead_internal.h
struct IdTranslation;       // header_merge_internal.h

// How an Input is opened.
struct InputOptions {
  // With threads > 1, BGZF-compressed input (BAM, SAM.gz) is decompressed
  // by that many htslib threads, and CRAM decoded by them; SAM text is
  // always parsed in the calling thread, because htslib's multithreaded SAM
  // parser reports errors late and at the wrong record.
  int threads = 1;
  // A regular file is read ahead (SequentialReadahead) in requests of this
  // many bytes; the pipeline passes whole requests of the input's device.
  uint64_t readahead_chunk = uint64_t{2} << 20;
  // Non-empty: a FASTA (indexed or not) that decodes CRAM, or supplies the
  // @SQ lines of SAM text without them.
  std::string reference;
  // --input-fmt-option: htslib's format options ("name=value" or a bare
  // "name", as hts_opt_add spells them), applied in order before the header
  // is read, as samtools applies them (e.g. required_fields=0x..,
  // decode_md=0 for CRAM, filter=EXPR for any input). See
  // CheckInputFormatOption.
  std::vector<std::string> format_options;
};

// OK when htslib knows `option` ("name=value" or "name") as a format
// option and rocksort lets it apply to an input; otherwise InvalidArgument
// naming it. Refused: nthreads (threads are set with -@) and verbosity
// (htslib's logging is set with --verbosity).
absl::Status CheckInputFormatOption(const std::string& option);

// An opened alignment input and its header.
class Input {
 public:
  // Opens `path` ("-" for stdin) as `options` say and reads its header.
  // NotFound when the file does not exist, InvalidArgument when it is not
  // an alignment format htslib knows, when htslib can't use the reference,
  // or when a format option is unknown or can't be applied (the message
  // names it), DataLoss when the header is truncated or corrupt.
  static absl::StatusOr<std::unique_ptr<Input>> Open(const std::string& path,
                                                     const InputOptions& options = {});
  // Open without Start: reads the header only; neither decode threads nor
  // readahead run until Start(). For inputs read later (InputSet).
  static absl::StatusOr<std::unique_ptr<Input>> OpenHeader(const std::string& path,
                                                           const InputOptions& options = {});
  // Starts the decode threads and the readahead Open asked for; the threads
  // are named "rs-decode". Call once, before reading records.
  // ResourceExhausted when the threads can't start.
  absl::Status Start();

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
  // What it was opened with.
  const InputOptions& options() const { return options_; }
  // Whether htslib threads decode ahead of the reader.
  bool threaded() const { return threaded_; }
  // Bytes of the file consumed so far, for progress: the compressed offset
  // of the BGZF block being read, or the position in a SAM text or CRAM
  // stream (CRAM and threaded BGZF read somewhat ahead of the records
  // delivered). Counted from the start of the stream for a pipe too. No
  // system call; call from the reading thread only.
  uint64_t bytes_consumed() const;
  // Whether the input is a regular file (not stdin, a pipe or a device).
  bool regular_file() const { return fd_ >= 0; }
  // The size of a regular file; 0 for anything else.
  uint64_t size() const { return version_.size; }

  // What tells one version of a regular file from another: a file renamed
  // over the path, or rewritten, differs in one of these.
  struct FileVersion {
    uint64_t device = 0;
    uint64_t inode = 0;
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    bool operator==(const FileVersion& o) const {
      return device == o.device && inode == o.inode && size == o.size && mtime_ns == o.mtime_ns;
    }
  };
  // The version opened (fstat of the descriptor); all zero when not a
  // regular file.
  const FileVersion& version() const { return version_; }
  // The version `st` describes.
  static FileVersion VersionOf(const struct stat& st);

 private:
  Input(std::string path, std::string name, htsFile* file, sam_hdr_t* header);
  absl::Status StartThreads();

  std::string path_;  // As given; "-" for stdin.
  std::string name_;
  htsFile* file_;      // Owned; closed in the destructor.
  sam_hdr_t* header_;  // Owned; destroyed in the destructor.
  // Regular files only: the descriptor under file_ (owned by file_) and
  // its version; -1 and all zero otherwise.
  int fd_ = -1;
  FileVersion version_;
  // What it was opened with; Start() takes the decode threads (> 1 to start
  // any) and the readahead's request size from it.
  InputOptions options_;
  bool started_ = false;
  // Decompression runs ahead in htslib threads. Their errors surface late
  // (records already queued are dropped), so on a read error RecordReader
  // re-reads a regular file single-threaded to name the exact record.
  bool threaded_ = false;
  // BGZF input with threads: the decode threads' pool (owned; destroyed
  // after file_ is closed) and how many decoded blocks it queues.
  static constexpr int kDecodeQueueBlocks = 32;
  hts_tpool* decode_pool_ = nullptr;
  // Regular files only: reads the file ahead in large requests.
  std::unique_ptr<SequentialReadahead> readahead_;
};

// Estimates the uncompressed BAM size of the input at `path` from its file
// size and the compression ratio of its first blocks (up to `sample_bytes`
// of data). Returns 0 when it cannot tell (stdin, a pipe, CRAM, an
// unreadable file). SAM text is counted 1:1 (BAM encoding is smaller, so
// this overestimates, which the compaction policy prefers to
// underestimating).
uint64_t EstimateUncompressedSize(const std::string& path,
                                  uint64_t sample_bytes = uint64_t{8} << 20);
// The sum of the estimates of `paths`, each from EstimateSampleBytes of
// data; 0 (unknown) if any is unknown.
uint64_t EstimateUncompressedSize(const std::vector<std::string>& paths);
// The sample of each of `inputs` inputs: 8 MiB shared among them, at
// least 1 MiB each, so that hundreds of inputs are not each read 8 MiB
// (~3 MiB of BGZF and a seek) deep before the sort starts.
uint64_t EstimateSampleBytes(size_t inputs);

struct LoadStats {
  uint64_t records = 0;         // Records written to the DB.
  uint64_t placed_records = 0;  // Those on a reference (tid >= 0).
  uint64_t record_bytes = 0;    // Sum of their BAM encodings (uncompressed).
  uint64_t checksum = 0;        // RecordChecksum of their BAM encodings.
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
  // this reader. The first record gets input index `first_seq`. `ids`
  // (may be null; must outlive the reader) gives records the @RG and @PG
  // IDs of a merged header before they are keyed (InputSet).
  RecordReader(Input& input, const keycodec::KeyEncoder& keys, uint64_t first_seq = 0,
               const IdTranslation* ids = nullptr);

  // Reads records and adds each, with its key, to `sink` until the records
  // and keys added hold at least `max_bytes` or the input ends. Returns the
  // number added: 0 once the input has ended.
  // Errors: DataLoss for truncated or corrupt input, InvalidArgument for a
  // record BAM cannot hold or the order cannot key, and whatever the sink
  // returns. Each message names the input and the 1-based record number.
  absl::StatusOr<size_t> ReadBatch(size_t max_bytes, record::KeyedRecordSink& sink);

  // What was read so far; complete once ReadBatch returned 0.
  const LoadStats& stats() const { return stats_; }
  // The bytes (records and keys) the last ReadBatch added.
  size_t last_batch_bytes() const { return last_batch_bytes_; }

 private:
  absl::Status ReadError(int code);

  Input& input_;
  const keycodec::KeyEncoder& keys_;
  const uint64_t first_seq_;
  const IdTranslation* const ids_;  // Null: the IDs are kept as read.
  size_t last_batch_bytes_ = 0;
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

// Byte counts of an InputSet's files, for a progress display.
// Thread-safe: the loading thread updates it, any thread may read it.
class InputProgress {
 public:
  // The inputs' total size; 0 (unknown) when one of them is not a regular
  // file (stdin, a pipe). Constant once the InputSet is open.
  uint64_t total_bytes() const { return total_bytes_; }
  // The bytes of the regular input files read so far: those read to their
  // end, and how far htslib has read into the current one (updated every
  // few MiB of records, so it runs a little ahead of the records stored).
  uint64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }

 private:
  friend class InputSet;
  friend class InputSetReader;
  uint64_t total_bytes_ = 0;
  std::atomic<uint64_t> bytes_read_{0};
};

// The inputs of one sort, read as one concatenated input.
class InputSet {
 public:
  // Opens `paths` (at least one; at most one "-", stdin) in order, each as
  // Input::OpenHeader(paths[i], options) with readahead_chunks[i] as its
  // readahead chunk, and combines their headers: one input's is kept as it
  // is, several are merged as samtools merge merges them
  // (header_merge_internal.h). Of several, every regular file but the
  // first is closed again until the reader comes to it.
  // REQUIRES: readahead_chunks.size() == paths.size().
  // Errors: those of Input::Open, naming the input; InvalidArgument for a
  // second "-" and when an input's @SQ lines differ from the first's (the
  // message names the input and the first line that differs).
  static absl::StatusOr<std::unique_ptr<InputSet>> Open(
      const std::vector<std::string>& paths, const InputOptions& options,
      const std::vector<uint64_t>& readahead_chunks);

  InputSet(const InputSet&) = delete;
  InputSet& operator=(const InputSet&) = delete;
  ~InputSet();

  // The combined header. Owned by this set.
  const sam_hdr_t& header() const { return *header_; }
  size_t size() const { return names_.size(); }
  // "stdin" or the path of input `i`, for messages.
  const std::string& name(size_t i) const { return names_[i]; }
  const InputProgress& progress() const { return progress_; }

 private:
  InputSet();
  friend class InputSetReader;

  // Reopens input `i`, closed after its header was read, and checks that it
  // is the version whose header was merged. Errors: those of
  // Input::OpenHeader; FailedPrecondition naming the input when it changed.
  absl::Status Reopen(size_t i);
  // Of the header's text, to tell a reopened input's header from the one
  // merged.
  static size_t HeaderHash(sam_hdr_t& header);

  // Null when closed: once read to its end, and, of several inputs, every
  // regular file but the first from when its header was read until its
  // turn comes (Reopen), so that hundreds of inputs hold neither a
  // descriptor nor htslib's buffers and header each while they wait.
  std::vector<std::unique_ptr<Input>> inputs_;
  // What each input was opened from and as, to reopen it and check it.
  struct Source {
    std::string path;
    InputOptions options;        // Its readahead chunk included.
    Input::FileVersion version;  // Its size is Input::size().
    size_t header_hash = 0;      // Of the header read; set where it is closed.
  };
  std::vector<Source> sources_;
  std::vector<std::string> names_;
  HeaderPtr header_;
  // Several inputs: each input's @RG/@PG ID translation; empty for one.
  std::vector<IdTranslation> ids_;
  InputProgress progress_;
};

// Reads the records of every input of an InputSet in order, as one input:
// input indexes run on from one file to the next. An input's decode
// threads start when its turn comes; it is closed once read to its end.
class InputSetReader {
 public:
  // `inputs` and `keys` must outlive this reader.
  InputSetReader(InputSet& inputs, const keycodec::KeyEncoder& keys);
  ~InputSetReader();

  // As RecordReader::ReadBatch, across inputs (a batch may span two).
  // Returns 0 once every input has ended. Errors name the input; an input
  // reopened in its turn that is not the file whose header was read is
  // FailedPrecondition.
  absl::StatusOr<size_t> ReadBatch(size_t max_bytes, record::KeyedRecordSink& sink);

  // Totals over the inputs; complete once ReadBatch returned 0.
  // missing_eof_marker: of any input.
  LoadStats stats() const;

  struct TruncatedInput {
    std::string name;
    uint64_t records = 0;  // The records read from it.
  };
  // The inputs that ended without their end-of-file marker.
  const std::vector<TruncatedInput>& missing_eof_marker() const { return truncated_; }

 private:
  absl::Status StartNext();
  void FinishCurrent();

  InputSet& inputs_;
  const keycodec::KeyEncoder& keys_;
  size_t current_ = 0;                    // The input being read.
  std::unique_ptr<RecordReader> reader_;  // Of input current_; null between inputs.
  LoadStats done_;                        // Of the inputs read to their end.
  uint64_t bytes_done_ = 0;               // Their sizes.
  std::vector<TruncatedInput> truncated_;
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
