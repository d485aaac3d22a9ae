// File: output/output.h
// -----------------------------------------------------------------------------
// Where sorted records go.
//
// OutputFile owns the destination: it writes the result under a temporary
// name beside the final one and renames it only in Commit(), after the
// caller has verified the write; if Commit() is never reached the partial
// file is removed, so a failed run never leaves a plausible output file.
// "-" writes to stdout.
//
// RecordSink is what the pipeline streams stored records (record/record.h)
// into, in sorted order. The BAM sink (OpenBamSink) is the zero-copy path:
// stored records already are BAM records, so it only packs them into BGZF
// blocks, compressed in parallel by libdeflate, and builds the index on the
// fly from the offsets it writes. Sinks that need htslib's writers (SAM,
// CRAM) decode each record (record::DecodeRecord) behind the same
// interface, so the pipeline does not change with the format.
//
// OutputFile is a single owner, not thread-safe. A RecordSink is used by one
// thread; the BAM sink runs its own compression and writer threads.
#ifndef ROCKSORT_OUTPUT_OUTPUT_H_
#define ROCKSORT_OUTPUT_OUTPUT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/interrupt.h"
#include "htslib/sam.h"

namespace rocksort::output {

class OutputFile {
 public:
  // "-" means stdout. An existing path that is not a regular file (a device
  // such as /dev/null, a FIFO) is opened and written as it is, like stdout:
  // there is no file to replace atomically (and renaming over /dev/null
  // would replace the device). Otherwise creates `<path>.partial.XXXXXX`
  // beside `path` with the permissions a new file would get
  // (0666 & ~umask). `registry` (may be null, not owned, must outlive this)
  // learns the partial file for forced cleanup.
  static absl::StatusOr<std::unique_ptr<OutputFile>> Create(const std::string& path,
                                                            CleanupRegistry* registry);
  // Whether Create writes `path` in place: "-" or an existing path that is
  // neither a regular file nor a directory.
  static bool WritesInPlace(const std::string& path);
  // The file a new output replaces: `path`, or for a symlink the file it
  // resolves to (the link itself is kept).
  static std::string TargetPath(const std::string& path);
  ~OutputFile();  // Removes the partial file unless committed.

  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  int fd() const { return fd_; }
  // The user-facing name: the final path, or "stdout".
  const std::string& name() const { return name_; }
  // stdout or a device/FIFO: written in place, nothing to rename or remove.
  bool is_stream() const { return is_stream_; }
  // The file being written until Commit (empty for a stream).
  const std::string& partial_path() const { return partial_; }

  // Makes what was written durable: fsync (also of stdout when it is a
  // regular file) and close, checking both. REQUIRES: everything was written
  // and verified. Errors name the file.
  absl::Status Finish();
  // The commit point: renames the partial file to its final name through
  // the registry's Publish (refused once a signal has come). Nothing that
  // can fail should follow it. A `companion` (the output's index) is renamed
  // in the same step, just before. REQUIRES: Finish() succeeded (on both).
  absl::Status Commit(OutputFile* companion = nullptr);

 private:
  OutputFile(std::string name, std::string target, std::string partial, int fd, bool is_stream,
             CleanupRegistry* registry)
      : name_(std::move(name)), target_(std::move(target)), partial_(std::move(partial)),
        fd_(fd), is_stream_(is_stream), registry_(registry) {}

  const std::string name_;
  const std::string target_;   // What the partial file is renamed to.
  const std::string partial_;  // Empty for a stream.
  int fd_;                     // Owned unless it is STDOUT_FILENO; -1 after Finish.
  const bool is_stream_;
  CleanupRegistry* const registry_;
  bool committed_ = false;
};

// Takes stored records in output order.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // Appends one stored record (record.h). An error is final: the output is
  // unusable and the caller discards it.
  virtual absl::Status Write(absl::string_view record) = 0;
  // Ends the output (the BGZF EOF block, the index) and waits until every
  // byte reached the file descriptor. Call once, after the last Write.
  virtual absl::Status Finish() = 0;
  // Bytes written to the file descriptor so far.
  virtual uint64_t bytes_written() const = 0;
};

struct BamSinkOptions {
  int level = -1;   // BGZF level 0..9; -1 = htslib's default (6).
  int threads = 1;  // Compression threads.
  // Bytes of records the sink may hold queued for its compressors beyond
  // two blocks per thread: how long the caller may stall (a disk read of
  // the merge feeding it) before the compressors run dry. QueueBlocks turns
  // it into blocks.
  size_t queue_bytes = 0;
  // Also write an index of the output to this file (empty: none), as
  // `samtools sort --write-index` does: BAI when index_name ends in ".bai",
  // else CSI (min_shift 14). Built with htslib's hts_idx_* from the offsets
  // the writer reports, so it is the index `samtools index` makes of the
  // output. REQUIRES: records arrive in coordinate order.
  std::string index_path;
  // The index's final name (index_path may be a partial file): for error
  // messages and the format.
  std::string index_name;
};

// Blocks the BAM sink queues beyond two per thread for `queue_bytes`: at
// least 4, at most 256 blocks of 64 KiB (each costs 128 KiB, input and
// output buffers).
size_t QueueBlocks(size_t queue_bytes);

// Writes the BAM header of `header` (magic, text, reference list) to `fd`,
// then takes records. `name` names the destination in errors.
// InvalidArgument when a reference is longer than BAM can describe.
absl::StatusOr<std::unique_ptr<RecordSink>> OpenBamSink(const sam_hdr_t& header, int fd,
                                                        const std::string& name,
                                                        const BamSinkOptions& options);

// Serialises `header` as a BAM header (magic, text, reference list).
// InvalidArgument when a reference is longer than BAM can describe.
absl::StatusOr<std::string> EncodeBamHeader(const sam_hdr_t& header);

}  // namespace rocksort::output

#endif  // ROCKSORT_OUTPUT_OUTPUT_H_
