// File: pipeline/pipeline.h
// -----------------------------------------------------------------------------
// One sort, end to end, in four phases:
//   open:  the inputs (loader; several combined as samtools merge combines
//          them), the output header (the order's @HD, @PG), the
//          partial output file (output), the temporary store (store);
//   load:  read a batch of keyed records into the store, commit it, repeat;
//   merge: let the store settle its sorted runs (store::FinishLoading);
//   emit:  stream the store's sorted reader into the output sink, check the
//          record count and checksum, commit the output, destroy the store.
// On any error the destructors remove the partial output and the store.
// The library prints nothing: what the user should see reaches the caller
// through SortObserver and the SortReport.
//
// Thread-safety: RunSort may be called from one thread at a time; it starts
// its own threads.
#ifndef ROCKSORT_PIPELINE_PIPELINE_H_
#define ROCKSORT_PIPELINE_PIPELINE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/disk_info.h"
#include "common/interrupt.h"
#include "keycodec/sort_order.h"
#include "output/output.h"
#include "store/store.h"

namespace rocksort::pipeline {

enum class Phase { kLoad, kMerge, kEmit };
const char* PhaseName(Phase phase);

struct SortOptions {
  // Paths, or "-" for stdin (at most once), read as their concatenation:
  // equal keys keep input order, then record order.
  std::vector<std::string> inputs = {"-"};
  std::string output = "-";  // Path, or "-" for stdout.
  keycodec::SortOrder order;
  // --reference: FASTA for decoding CRAM input (and @SQ lines for SAM text
  // that has none), as samtools' --reference. Empty: htslib's own lookup
  // (the header's UR, REF_PATH, REF_CACHE).
  std::string reference;
  // --input-fmt-option: htslib's format options for the input, in order
  // (loader::InputOptions::format_options), e.g. "required_fields=0x1ff".
  std::vector<std::string> input_format_options;
  // -O, --output-fmt-option, -l, -u and the output's name, resolved as
  // samtools does (output::ResolveOutputFormat): BAM, SAM, CRAM, ... and
  // the compression level. Default: BAM at the default level.
  output::OutputFormat format;
  // --write-index: also write an index of the output, as samtools sort's
  // --write-index: to `index_output`, else OUTPUT.csi (OUTPUT.crai for
  // CRAM). BAI when the name ends in ".bai", CSI otherwise (CRAM: always
  // .crai). Needs an output file (not stdout) in a format samtools can
  // index (not uncompressed SAM, FASTQ or FASTA).
  bool write_index = false;
  std::string index_output;
  // -@: threads for decoding, compression and RocksDB background work;
  // values below 1 mean 1 (samtools counts "additional" threads the same way).
  int threads = 1;
  uint64_t memory_per_thread = uint64_t{768} << 20;  // -m, bytes.
  // -T: where the temporary DB goes. An existing directory gets
  // DIR/rocksort.XXXXXX, anything else is a prefix: PREFIX.rocksort.XXXXXX.
  // Empty: beside the output file, or in $TMPDIR (else ".") for stdout.
  std::string temp_prefix;
  // -s, bytes. Empty: estimated from the input file (or adaptive for a
  // pipe). 0 (-s 0, --no-compaction): no background compaction.
  std::optional<uint64_t> size_hint;
  // --disk: the kind of disk under the temporary DB; empty = detect it from
  // sysfs (common/disk_info.h).
  std::optional<DiskKind> disk;
  // --run-compression: how the sorted runs are compressed on disk.
  store::RunCompression run_compression = store::RunCompression::kAuto;
  bool add_pg = true;        // --no-PG clears it.
  std::string command_line;  // For the @PG CL field.
  std::string version;       // For the @PG VN field.
  int verbosity = 0;         // -v: notices about the plan and the run.
};

// Live counters of a running sort, for a progress display. RunSort stores
// them with relaxed atomic stores once per loaded batch (a few MiB of
// records) and once every few thousand records written: no lock and no
// system call per record. Any thread may read them at any time; each value
// is recent, but together they are not one consistent snapshot.
struct SortProgress {
  // Loading: records read so far (final once loading ends), and the input
  // bytes consumed (compressed bytes for BAM and BGZF; loader::Input::
  // bytes_consumed) of `input_size` (0 = unknown: stdin, a pipe).
  std::atomic<uint64_t> records_loaded{0};
  std::atomic<uint64_t> input_bytes{0};
  std::atomic<uint64_t> input_size{0};
  // Writing: records handed to the output and their uncompressed BAM size.
  std::atomic<uint64_t> records_written{0};
  std::atomic<uint64_t> record_bytes_written{0};
};

// What the caller hears while a sort runs. Each member may be empty.
struct SortObserver {
  // A phase starts; called on the calling thread (progress, tests that
  // interrupt a given phase).
  std::function<void(Phase)> on_phase;
  // One line for the user, without a trailing newline: warnings always,
  // plan and progress notices with verbosity > 0. Called from any thread.
  std::function<void(const std::string&)> on_notice;
  // Kept up to date while the sort runs, if not null. Not owned; must
  // outlive RunSort.
  SortProgress* progress = nullptr;
};

// CPU time of one group of threads (named alike: "rocksort" for the main
// thread, "rs-decode" for htslib's decoders, "rs-bgzf" for compressors,
// "rocksdb:low"/"rocksdb:high" for RocksDB's pools) within one phase. The
// group "ended threads", with `threads` 0 (not counted), is the threads that
// ended within the phase, such as an input's decoders once it was read.
struct ThreadUsage {
  std::string group;
  int threads = 0;
  double cpu_seconds = 0;
};

struct PhaseReport {
  Phase phase = Phase::kLoad;
  double seconds = 0;
  // The process's peak resident memory at the end of the phase (since the
  // start): a phase that raised it set the sort's peak.
  uint64_t peak_rss_bytes = 0;
  std::vector<ThreadUsage> threads;
};

// What a sort did, for -v and --stats-json. ToText and ToJson render the
// same facts.
struct SortReport {
  std::string order;  // SortOrder::Describe().
  DiskKind disk = DiskKind::kSsd;
  std::string disk_reason;          // How the disk kind was decided.
  uint64_t disk_request_bytes = 0;  // DiskDetection::request_bytes (0 = unknown).
  uint64_t memory_budget = 0;       // threads x -m.
  uint64_t size_hint = 0;           // The size the store planned with (0 = unknown).
  std::string size_hint_source;     // "-s", "estimated from the input file", ...
  std::string temp_dir;
  // The inputs that had no end-of-file marker (BGZF EOF block, CRAM EOF
  // container: each may be truncated at a block boundary), with the records
  // read from each; the CLI warns after a successful sort.
  struct TruncatedInput {
    std::string name;
    uint64_t records = 0;
  };
  std::vector<TruncatedInput> inputs_missing_eof_marker;
  uint64_t records = 0;
  uint64_t record_bytes = 0;  // Uncompressed BAM record bytes (the real -s).
  uint64_t output_bytes = 0;  // Compressed bytes written.
  store::StoreReport store;
  double read_seconds = 0;  // The loader's wall time reading and keying records.
  // The BAM sink's compressors' wait for records and the final merge's wait
  // for the compressors (absent for the htslib sinks, which do not say).
  std::optional<output::RecordSink::Waits> emit_waits;
  std::vector<PhaseReport> phases;
  // The whole process, measured when RunSort returns.
  double wall_seconds = 0;
  double cpu_seconds = 0;
  uint64_t peak_rss_bytes = 0;

  double phase_seconds(Phase phase) const;
  // The -v summary: several lines, each starting "rocksort: ", ending "\n".
  std::string ToText() const;
  // The same as one JSON object.
  std::string ToJson() const;
};

// End-to-end integrity check: OK when the sink got exactly the records the
// loader read (count, bytes and order-independent checksum), otherwise
// DataLoss naming `output_name`.
struct RecordTally {
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint64_t checksum = 0;
};
absl::Status VerifyIntegrity(const RecordTally& loaded, const RecordTally& emitted,
                             const std::string& output_name);

// The memory budget B of a sort: threads (at least 1) x memory_per_thread.
uint64_t MemoryBudget(const SortOptions& options);

// The temporary directory prefix RunSort uses for `options` (see temp_prefix).
std::string TempDirPrefix(const SortOptions& options);

// Sorts options.inputs into options.output. `cancelled` (may be null) stops
// the sort with Cancelled; `registry` (may be null) learns every path to
// remove on a forced exit. `report` (may be null) is filled as far as the
// sort got, also on failure.
absl::Status RunSort(const SortOptions& options, const std::atomic<bool>* cancelled,
                     CleanupRegistry* registry, const SortObserver& observer, SortReport* report);

}  // namespace rocksort::pipeline

#endif  // ROCKSORT_PIPELINE_PIPELINE_H_
