// File: emitter/emitter.h
// -----------------------------------------------------------------------------
// Streams the sorted records out of the temporary DB as BAM: the header,
// then every value in key order (merged across the lanes' column
// families), concatenated into BGZF blocks compressed in parallel
// (emitter/bgzf_writer.h). Values are already BAM-encoded records
// (loader/bam_record.h), so nothing is parsed or allocated per record.
//
// Owns nothing it is given. Thread-safety: one call at a time per DB; it
// runs its own compression threads.
#ifndef ROCKSORT_EMITTER_EMITTER_H_
#define ROCKSORT_EMITTER_EMITTER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "htslib/sam.h"
#include "rocksdb/db.h"

namespace rocksort::emitter {

struct EmitOptions {
  int level = -1;             // BGZF level 0..9; -1 = default (6).
  int threads = 1;            // Compression threads.
  size_t readahead = 0;       // Per-file readahead of the DB iterator, bytes.
  // Column families holding the records ("lanes", compaction_policy.h);
  // their iterators are merged by key. Empty = the default one. Not owned.
  std::vector<rocksdb::ColumnFamilyHandle*> lanes;
  // Polled every few thousand records; Cancelled once it is true. May be null.
  const std::atomic<bool>* cancelled = nullptr;
  // Also write an index of the output to this file (empty: none), as
  // `samtools sort --write-index` does: BAI when index_name ends in ".bai", else CSI
  // (min_shift 14). Built with htslib's hts_idx_* from the offsets the
  // writer reports, so it is the index `samtools index` makes of the output.
  std::string index_path;
  // The index's final name (index_path may be a partial file): for error
  // messages and the format.
  std::string index_name;
};

// Blocks the BGZF writer may queue for its compressors beyond two per
// thread (BgzfWriter::Options::queue_blocks). This thread reads every run
// with synchronous, readahead-sized reads; while one is pending (on a
// rotating disk a seek plus readahead / ~180 MB/s: ~20 ms for 2 MiB) the
// compressors live on the queue, and they use up ~60 MB/s each at the
// default level. So the queue holds readahead x threads / 2 bytes of
// records (2 MiB at -@ 2, ~17 ms of their work), at least 4 and at most 256
// blocks of 64 KiB; each block costs 128 KiB (input and output buffers).
size_t QueueBlocks(const EmitOptions& options);

struct EmitStats {
  uint64_t records = 0;        // Records written.
  uint64_t record_bytes = 0;   // Their uncompressed BAM size.
  uint64_t bytes_written = 0;  // Compressed bytes written to the fd.
  uint64_t checksum = 0;       // RecordChecksum of the records written.
};

// Serialises `header` as a BAM header (magic, text, reference list).
// InvalidArgument when a reference is longer than BAM can describe.
absl::StatusOr<std::string> EncodeBamHeader(const sam_hdr_t& header);

// Writes a complete BAM (header, records of `db` in key order, EOF block) to
// `fd`, which it does not close. `out_name` names the destination in errors.
// Errors: Internal for RocksDB read errors, Unavailable for write errors,
// Cancelled when interrupted.
absl::StatusOr<EmitStats> EmitBam(rocksdb::DB* db, const sam_hdr_t& header, int fd,
                                  const std::string& out_name, const EmitOptions& options);

}  // namespace rocksort::emitter

#endif  // ROCKSORT_EMITTER_EMITTER_H_
