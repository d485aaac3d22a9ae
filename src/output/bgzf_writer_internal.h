// File: output/bgzf_writer_internal.h  (internal to output/ and its tests)
// -----------------------------------------------------------------------------
// A BGZF writer whose blocks are compressed in parallel by libdeflate and
// written strictly in order, with bounded memory: a fixed pool of
// 2 x threads + queue_blocks blocks (each 64 KiB in, 64 KiB out) cycles
// between the caller (filling), the workers (compressing) and one writer
// thread.
//
// Format (SAM/BAM spec 4.1): gzip members of at most 64 KiB with the "BC"
// extra field holding the member size - 1, a CRC32 and ISIZE trailer, and the
// 28-byte empty EOF member at the end. Input blocks hold at most 0xff00
// bytes, as htslib's, so that even incompressible data fits a member.
// Compression levels 1..9 map to libdeflate levels as htslib maps them
// (1,2,3,5,6,7,8,10,12); level 0 writes stored (uncompressed) deflate blocks,
// which is what `samtools -u` writes.
//
// Thread-safety: the public methods are called from one thread; the class
// runs its own worker and writer threads internally.
#ifndef ROCKSORT_OUTPUT_BGZF_WRITER_INTERNAL_H_
#define ROCKSORT_OUTPUT_BGZF_WRITER_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rocksort::output {

inline constexpr size_t kBgzfMaxInput = 0xff00;
inline constexpr size_t kBgzfMaxBlock = 0x10000;

// What an index (BAI/CSI) needs of one record; see BgzfWriter::Options.
struct IndexEntry {
  int32_t tid = -1;
  int64_t beg = -1;  // 0-based start, -1 without a position.
  int64_t end = 0;   // 0-based end (exclusive), as htslib's bam_endpos.
  bool mapped = false;
};

class BgzfWriter {
 public:
  // Called on the writer thread, in record order, for every record written
  // with an IndexEntry, with the BGZF virtual offset just past the record:
  // the next block's start (offset 0) when the record ends its block, which
  // is what htslib's writer (hts_idx_amend_last) and reader both report.
  // An error fails the writer.
  using IndexCallback = std::function<absl::Status(const IndexEntry&, uint64_t end_offset)>;

  struct Options {
    int level = 6;    // 0..9; -1 means the htslib default (6).
    int threads = 1;  // Compression workers, >= 1.
    // Blocks beyond two per worker: how far the caller may run ahead of the
    // workers, and so how long it may stall (say, on a disk read) before the
    // workers run out of blocks. At least 4.
    size_t queue_blocks = 4;
    IndexCallback on_record;  // May be empty.
  };

  // Writes to `fd` (not owned; the caller closes it). `name` names the
  // destination in error messages.
  static absl::StatusOr<std::unique_ptr<BgzfWriter>> Create(int fd, std::string name,
                                                            const Options& options);
  ~BgzfWriter();  // Stops the threads; does not write the EOF block.

  BgzfWriter(const BgzfWriter&) = delete;
  BgzfWriter& operator=(const BgzfWriter&) = delete;

  // Appends `data`, splitting it across blocks wherever a block fills.
  absl::Status Write(absl::string_view data);

  // Appends one record: like htslib's bgzf_flush_try + bgzf_write, starts a
  // new block first when the record would not fit in the current one, so a
  // record that fits in a block never straddles two (readers and indexers
  // rely on this for cheap random access).
  // With `entry`, Options::on_record learns the record's end offset once
  // its block is written.
  absl::Status WriteRecord(absl::string_view record, const IndexEntry* entry = nullptr);

  // Waits until every flushed block reached the fd; returns the bytes
  // written (the address of the next block). Errors as Close.
  absl::StatusOr<uint64_t> WaitForWrites();

  // Ends the current block (if not empty) so the next byte starts a block.
  absl::Status FlushBlock();

  // Flushes, appends the EOF block, waits until every byte reached the fd.
  // Returns the first error seen by any thread. Call once.
  absl::Status Close();

  // Bytes written to the fd so far (compressed).
  uint64_t bytes_written() const;

  // Wall time the workers spent waiting for a block to compress (summed
  // over the workers), and the caller waiting for a free block, so far.
  struct Waits {
    double workers_idle_seconds = 0;
    double caller_blocked_seconds = 0;
  };
  Waits waits() const;

 private:
  class Impl;
  explicit BgzfWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Compresses `in` (at most kBgzfMaxInput bytes) into one complete BGZF member
// at `out` (kBgzfMaxBlock bytes). Returns the member's size. `level` is 0..9.
// Exposed for tests.
absl::StatusOr<size_t> CompressBgzfBlock(absl::string_view in, int level, char* out);

// The 28-byte BGZF end-of-file member.
absl::string_view BgzfEofBlock();

}  // namespace rocksort::output

#endif  // ROCKSORT_OUTPUT_BGZF_WRITER_INTERNAL_H_
