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
// fly from the offsets it writes. The htslib sink (SAM, SAM.gz, CRAM, and
// FASTQ/FASTA as samtools writes them) decodes each record
// (record::DecodeRecord) and hands it to htslib's writer behind the same
// interface, so the pipeline does not change with the format: it resolves
// an OutputFormat once (ResolveOutputFormat, samtools' rules), checks it
// before the sort (CheckSink) and opens the sink for it (OpenSink).
//
// OutputFile is a single owner, not thread-safe. A RecordSink is used by one
// thread; the BAM sink runs its own compression and writer threads, the
// htslib sink htslib's thread pool. The format functions are pure and
// thread-safe.
#ifndef ROCKSORT_OUTPUT_OUTPUT_H_
#define ROCKSORT_OUTPUT_OUTPUT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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
  // resolves to, or for a dangling one the missing file it names (the link
  // itself is kept).
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
  // in the same step, just after. REQUIRES: Finish() succeeded (on both).
  absl::Status Commit(OutputFile* companion = nullptr);

 private:
  OutputFile(std::string name, std::string target, std::string partial, int fd, bool is_stream,
             CleanupRegistry* registry)
      : name_(std::move(name)),
        target_(std::move(target)),
        partial_(std::move(partial)),
        fd_(fd),
        is_stream_(is_stream),
        registry_(registry) {}

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
  // Wall time the sink's compressors waited for records (summed over
  // them) and the caller waited for the compressors, so far; nullopt where
  // the sink does not measure it (the htslib sinks).
  struct Waits {
    double compressors_idle_seconds = 0;
    double caller_blocked_seconds = 0;
  };
  virtual std::optional<Waits> waits() const { return std::nullopt; }
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

// ---------------------------------------------------------------------------
// Output formats, chosen as samtools 1.23.1 `sort` chooses them.

// What htslib writes. DO NOT rely on the enum values; they are not stored.
enum class OutputKind { kBam, kSam, kCram, kFastq, kFasta };

// A resolved output format: what ResolveOutputFormat returns and the
// pipeline passes to CheckSink and OpenSink unchanged. The default is BAM
// at the default level, what rocksort writes without format flags.
struct OutputFormat {
  OutputKind kind = OutputKind::kBam;
  // SAM, FASTQ and FASTA only: BGZF-compressed text (htslib's mode "z").
  // BAM always is BGZF, CRAM has its own compression.
  bool bgzf = false;
  // -l / -u: the digit samtools appends to the open mode, 0..9; -1 = none
  // (htslib's default). htslib uses it for BGZF and CRAM and ignores it for
  // uncompressed text, as samtools does.
  int level = -1;
  // The output format options (htslib's hts_opt_add spellings, "name=value"
  // or a bare "name"), in the order given; the htslib sink applies them
  // with hts_opt_apply after opening, as samtools does. --reference FILE is
  // here as "reference=FILE", as samtools adds it. Validated by
  // ResolveOutputFormat.
  std::vector<std::string> options;

  // The BGZF level of the BAM sink: `level`, overridden by each level=N
  // and by the profiles (fast: 2, normal: default, small and archive: 9, as
  // htslib maps them with libdeflate), in order, as hts_opt_apply applies
  // them after opening. -1 = default (6).
  int EffectiveLevel() const;
  // htslib's open mode for the htslib sink: "w", then b/c/f/F for the
  // format, "z" for BGZF text, and the level digit, e.g. "wz6" or "wc".
  std::string HtsMode() const;
  // "BAM", "SAM", "BGZF-compressed SAM", "CRAM", "FASTQ", ... for messages.
  std::string Describe() const;
  // Whether samtools can index the output (--write-index): BAM, CRAM and
  // BGZF-compressed SAM (samtools fails for the others).
  bool indexable() const;
  // The index samtools' --write-index writes when no ##idx## name is given:
  // OUT + ".crai" for CRAM, else OUT + ".csi".
  const char* index_suffix() const { return kind == OutputKind::kCram ? ".crai" : ".csi"; }
  // The reference of the last reference= option ("" if none): what CRAM
  // encoding uses, with htslib's own lookup (REF_PATH, REF_CACHE, @SQ UR
  // and M5) for sequences it does not hold.
  std::string reference() const;
};

// The command line's output format flags, as samtools' `sort` reads them.
struct OutputFormatRequest {
  // The output file (-o or the positional OUT) without any "##idx##INDEX";
  // "-" for stdout.
  std::string path = "-";
  // The format name of the last -O / --output-fmt (before any comma); empty
  // when none was given.
  std::string format;
  // How that -O was given, for messages (e.g. "-O sam,level=1").
  std::string format_origin;
  struct Option {
    std::string text;    // "level=1", "embed_ref", "reference=ref.fa"
    std::string origin;  // For messages: "--output-fmt-option level=1".
  };
  // Every format option in command-line order: those after -O's comma,
  // --output-fmt-option's, and "reference=FILE" for --reference.
  std::vector<Option> options;
  // -l N / -u (0): the last one given; -1 = neither.
  int level = -1;
};

// The output format samtools 1.23.1 `sort` writes for `request`:
//   * the mode from the file name as htslib's sam_open_mode reads it: the
//     extension after the last '.' (before any "##idx##"), taking one more
//     for a final ".gz" (lower case only) or ".bgz"; "sam" SAM, "sam.gz"
//     BGZF SAM, "cram" CRAM, "fq"/"fastq" and "fa"/"fasta" (each also with
//     ".gz") FASTQ and FASTA, matched in any case; anything else, and
//     stdout, BAM;
//   * -O sets the format (sam, sam.gz, bam, cram, fastq/fq, fasta/fa and
//     their .gz forms, in any case) whatever the name, keeping the name's
//     BGZF compression for text formats. -O sam.gz, and -O sam with any
//     level= option, write BGZF SAM; -O fastq.gz and -O fasta.gz do not
//     compress (htslib only applies "compressed" to SAM);
//   * -l / -u is the mode's level digit, which uncompressed text ignores.
// InvalidArgument, naming the flag, for an unknown format or option, an
// option rocksort does not take (nthreads=: use -@; filter=, which would
// drop records; verbosity=: use -v) and a level= that is not 0..9 (or has
// a leading zero, which samtools reads as octal).
absl::StatusOr<OutputFormat> ResolveOutputFormat(const OutputFormatRequest& request);

// How a sink runs and what else it writes.
struct SinkOptions {
  int threads = 1;  // -@: BGZF compressors (BAM) or htslib's thread pool.
  // BAM only: see BamSinkOptions::queue_bytes.
  size_t queue_bytes = 0;
  // Also write an index to this file (empty: none), as samtools sort
  // --write-index: for BAM and BGZF SAM, BAI when index_name ends in
  // ".bai", else CSI; for CRAM, .crai. REQUIRES: the format is indexable
  // and records arrive in coordinate order.
  std::string index_path;
  // The index's final name (index_path may be a partial file).
  std::string index_name;
};

// Checks, before the sort, what can fail when the output is opened: an
// index asked for a format that has none (InvalidArgument), and for the
// formats htslib writes, the options and the header as htslib takes them,
// by opening a writer on /dev/null and writing the header: a CRAM
// reference that can't be loaded (a missing or unreadable FASTA, or
// embed_ref=1 without a reference) fails here instead of after the sort.
// `name` names the output in messages.
absl::Status CheckSink(const OutputFormat& format, const sam_hdr_t& header, const std::string& name,
                       bool write_index);

// Opens the sink for `format` on `fd`, which stays the caller's (the htslib
// sink writes through a duplicate and closes only that), and writes the
// header: the BAM sink for BAM, the htslib sink otherwise. `header` must
// outlive the sink. Errors name `name` and, for CRAM, the reference.
absl::StatusOr<std::unique_ptr<RecordSink>> OpenSink(const OutputFormat& format,
                                                     const sam_hdr_t& header, int fd,
                                                     const std::string& name,
                                                     const SinkOptions& options);

}  // namespace rocksort::output

#endif  // ROCKSORT_OUTPUT_OUTPUT_H_
