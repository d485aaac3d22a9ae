// File: pipeline/pipeline.h
// -----------------------------------------------------------------------------
// One coordinate sort, end to end:
//   open input (loader) -> create partial output + temporary DB (TempDb,
//   OutputFile) -> load every record (loader) -> flush and, if there are more
//   sorted runs than the final merge can read within the memory budget,
//   merge them down -> stream the DB out as BAM (emitter) -> check the record
//   count -> commit the output -> destroy the DB.
// On any error the destructors remove the partial output and the DB.
//
// Thread-safety: RunSort may be called from one thread at a time per
// options; it starts its own threads.
#ifndef ROCKSORT_PIPELINE_PIPELINE_H_
#define ROCKSORT_PIPELINE_PIPELINE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "compaction_policy/compaction_policy.h"
#include "emitter/emitter.h"
#include "loader/loader.h"
#include "common/interrupt.h"

namespace rocksort::pipeline {

enum class Phase { kLoad, kMerge, kEmit };

struct SortOptions {
  std::string input = "-";   // Path, or "-" for stdin.
  std::string output = "-";  // Path, or "-" for stdout.
  // --reference: FASTA for decoding CRAM input (and @SQ lines for SAM text
  // that has none), as samtools' --reference. Empty: htslib's own lookup
  // (the header's UR, REF_PATH, REF_CACHE).
  std::string reference;
  // --write-index: also write an index of the output, as samtools sort's
  // --write-index: to `index_output`, else OUTPUT.csi. BAI when the name
  // ends in ".bai", CSI otherwise. Needs an output file (not stdout).
  bool write_index = false;
  std::string index_output;
  // -@: threads for decoding, compression and RocksDB background work;
  // values below 1 mean 1 (samtools counts "additional" threads the same way).
  int threads = 1;
  uint64_t memory_per_thread = uint64_t{768} << 20;  // -m, bytes.
  int level = -1;            // -l 0..9, -1 = default; -u sets 0.
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
  compaction_policy::RunCompression run_compression = compaction_policy::RunCompression::kLz4;
  bool add_pg = true;        // --no-PG clears it.
  std::string command_line;  // For the @PG CL field.
  std::string version;       // For the @PG VN field.
  int verbosity = 0;         // -v: plan and statistics on stderr.
  // Called as each phase starts, on the calling thread (-v progress, tests
  // that interrupt a given phase). May be empty.
  std::function<void(Phase)> on_phase;
};

// What a sort did, for -v and --stats-json.
struct SortReport {
  DiskKind disk = DiskKind::kSsd;
  std::string disk_reason;          // How the disk kind was decided.
  uint64_t disk_request_bytes = 0;  // DiskDetection::request_bytes (0 = unknown).
  // The input had no BGZF EOF marker (it may be truncated at a block
  // boundary); the CLI warns after a successful sort.
  bool input_missing_eof_marker = false;
  uint64_t size_hint = 0;           // The size the policy planned with (0 = unknown).
  std::string size_hint_source;     // "-s", "estimated from the file", "none".
  std::string compaction_mode;      // "off", "planned" or "adaptive".
  int lanes = 1;                    // Column families the runs were spread over.
  bool adaptive_compaction_started = false;
  uint64_t records = 0;
  uint64_t record_bytes = 0;        // Uncompressed BAM record bytes (the real -s).
  uint64_t output_bytes = 0;        // Compressed bytes written.
  int runs_flushed = 0;             // Memtable flushes, i.e. sorted runs created.
  uint64_t flush_bytes = 0;         // Bytes those flushes wrote.
  int compactions = 0;              // Background compactions plus intermediate merges.
  uint64_t compaction_bytes = 0;    // Bytes they wrote (both kinds).
  int intermediate_merges = 0;      // Merges rocksort ran after loading.
  uint64_t intermediate_merge_bytes = 0;  // Bytes they wrote (part of compaction_bytes).
  std::vector<int> runs_after_load_per_lane;  // Runs per lane when loading ended.
  std::vector<int> runs_merged_per_lane;  // Runs read by the final merge, per lane.
  size_t final_readahead = 0;
  uint64_t peak_temp_bytes = 0;     // Largest total SST size seen (SstFileManager).
  double load_seconds = 0;
  double merge_seconds = 0;         // Flush, compaction wait, intermediate merges.
  double emit_seconds = 0;

  // Runs read by the final merge.
  int runs_merged() const {
    return std::accumulate(runs_merged_per_lane.begin(), runs_merged_per_lane.end(), 0);
  }

  // Bytes written to the temporary DB per byte flushed (1.0 = no merging).
  double write_amplification() const {
    return flush_bytes == 0 ? 0.0
                            : static_cast<double>(flush_bytes + compaction_bytes) / flush_bytes;
  }
};

// End-to-end integrity check: OK when the emitter wrote exactly the records
// the loader read (count, bytes and order-independent checksum), otherwise
// DataLoss naming `output_name`.
absl::Status VerifyIntegrity(const loader::LoadStats& loaded, const emitter::EmitStats& emitted,
                             const std::string& output_name);

// The memory budget B of a sort: threads (at least 1) x memory_per_thread.
uint64_t MemoryBudget(const SortOptions& options);

// The temporary directory prefix RunSort uses for `options` (see temp_prefix).
std::string TempDirPrefix(const SortOptions& options);

// Sorts options.input into options.output by coordinate.
// `cancelled` (may be null) stops the sort with Cancelled; `registry`
// (may be null) learns every path to remove on a forced exit.
absl::Status RunSort(const SortOptions& options, const std::atomic<bool>* cancelled,
                     CleanupRegistry* registry, SortReport* report);

}  // namespace rocksort::pipeline

#endif  // ROCKSORT_PIPELINE_PIPELINE_H_
