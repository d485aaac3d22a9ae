// File: store/prefetch_fs_internal.h  (internal to store/ and its tests)
// -----------------------------------------------------------------------------
// Reads every sorted run ahead of its reader, into the page cache.
//
// A merge reads each of its runs from start to end, a block at a time, in an
// order only the keys decide. RocksDB's own readahead reads the block it
// needs plus the readahead, synchronously, into a buffer per run: while one
// run's read waits for a seek, the merge and the compressors it feeds stand
// still, and every run's buffer is resident memory. Here RocksDB reads one
// block at a time (no readahead of its own), and this file system keeps
// each run's reader ahead of the disk: when the reader gets within `lead`
// bytes of what was requested, the run's next `chunk` bytes are queued for
// the file system's reader threads, which read them (into a scratch buffer
// that is thrown away: what matters is that they land in the page cache).
// The merge's own reads are then copies from the page cache. Reading,
// rather than POSIX_FADV_WILLNEED, makes the kernel issue requests as large
// as the device takes (measured on the emulated disk: 1-2 MiB reads made
// 0.75-1.2 MiB requests; the same advice, interleaved with the reader's
// block reads, far smaller ones, and each request costs a seek on a
// rotating disk). What a reader has passed is dropped from the page cache
// (POSIX_FADV_DONTNEED): every block of a run is read once, and the cache
// must keep room for the chunks ahead of the other runs' readers.
//
// Staggered windows (FirstRead::kStaggered, the final merge's setting): the
// final merge consumes its K runs at about the same pace, the compressors'
// pace, so if every run's window started with a whole chunk, their chunk
// ends would fall together and K requests would queue at once (at 150
// requests/s, 254 runs' requests take 1.7 s, longer than a lead lasts). So
// a window's first read covers only the lead plus a fraction of the rest of
// a chunk, the fraction taking the next value of a low-discrepancy sequence
// (frac(n x 0.618...)) for the n-th window: the runs' chunk ends spread
// evenly over a chunk's progress, and the requests reach the disk at the
// pace the merge consumes. Merges while loading read few runs each, as fast
// as their thread goes; there a short first read only let the merge outrun
// its prefetch and read blocks itself (measured: more requests and a
// slower load), so they read whole first chunks.
//
// The page cache a merge of K runs holds is then about K x (chunk + lead);
// the options plan sizes chunks so that it stays within a budget
// (options_plan_internal.h). Resident memory per run is a block and the
// run's index; the reader threads hold one chunk each.
//
// Only table files (*.sst) are prefetched, and only while they are read
// sequentially: a read that lands outside a file's current window (a
// table's footer and index at its end, read when it is opened) starts a
// new window there.
//
// Releasing behind (SetReleaseBehind, for the final merge only): what a
// run's reader has passed, `lag` bytes behind its read, is handed to a
// callback that frees the space (ScratchFileSystem::ReleaseRange), in steps
// of a few MiB. Only reads that continue the previous one, the reader's
// scan of the data blocks, release: a table's footer and index at its end
// are read when it is opened, which is why the store turns this on only
// once the final merge's cursors have opened every run (and they keep
// them open until they go).
//
// Thread-safety: the file system and its files are thread-safe (RocksDB may
// read one file from several threads); SetReadahead may be called at any
// time and applies to the following reads.
#ifndef ROCKSORT_STORE_PREFETCH_FS_INTERNAL_H_
#define ROCKSORT_STORE_PREFETCH_FS_INTERNAL_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rocksdb/file_system.h"

namespace rocksort::store {

class PrefetchFileSystem : public rocksdb::FileSystemWrapper {
 public:
  // How long a window's first read is (see above).
  enum class FirstRead { kWholeChunk, kStaggered };

  // Reads through `target` (the default file system in production), with
  // `readers` threads reading ahead. Prefetching is off until SetReadahead.
  PrefetchFileSystem(std::shared_ptr<rocksdb::FileSystem> target, int readers);
  ~PrefetchFileSystem() override;  // Stops the reader threads.

  static const char* kClassName() { return "RocksortPrefetchFileSystem"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus NewRandomAccessFile(const std::string& fname,
                                        const rocksdb::FileOptions& options,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* result,
                                        rocksdb::IODebugContext* dbg) override;

  // Reads `chunk` bytes at a time, queued when a reader gets within `lead`
  // bytes of what was queued before (a lead longer than the chunk keeps
  // several chunks queued ahead), a window's first read as `first_read`
  // says. chunk 0 turns prefetching (and dropping behind) off.
  void SetReadahead(uint64_t chunk, uint64_t lead, FirstRead first_read);

  // From now on each table's reader releases what it has passed, `lag`
  // bytes behind, through `release(path, offset, length)` (see above).
  // A lag of 0 turns it off.
  using ReleaseFunction = std::function<void(const std::string&, uint64_t, uint64_t)>;
  void SetReleaseBehind(uint64_t lag, ReleaseFunction release);

  // Bytes read ahead so far, for the report.
  uint64_t prefetched_bytes() const { return prefetched_.load(std::memory_order_relaxed); }
  // Readers' reads so far that waited for the disk (took over 0.5 ms: the
  // prefetch had not brought their pages in), and their wall time.
  struct ReadStalls {
    uint64_t reads = 0;
    double seconds = 0;
  };
  ReadStalls read_stalls() const;

  // Used by the files.
  struct Settings {
    uint64_t chunk = 0;
    uint64_t lead = 0;
    FirstRead first_read = FirstRead::kWholeChunk;
  };
  Settings settings() const;
  // The length of the next window's first read, in [lead, chunk] (for a
  // lead of a chunk or more, [chunk / 2, chunk]), a whole number of pages
  // unless it is the chunk.
  uint64_t NextFirstRead(const Settings& settings);
  void Enqueue(std::shared_ptr<const std::string> path, uint64_t offset, uint64_t length);
  uint64_t release_lag() const { return release_lag_.load(std::memory_order_acquire); }
  void Release(const std::string& path, uint64_t offset, uint64_t length);
  void CountStalledRead(absl::Duration took);

 private:
  struct Request {
    std::shared_ptr<const std::string> path;
    uint64_t offset;
    uint64_t length;
  };
  void ReaderLoop();

  std::atomic<uint64_t> windows_{0};  // Staggered windows opened.
  std::atomic<uint64_t> chunk_{0};
  std::atomic<uint64_t> lead_{0};
  std::atomic<FirstRead> first_read_{FirstRead::kWholeChunk};
  std::atomic<uint64_t> prefetched_{0};
  std::atomic<uint64_t> stalled_reads_{0};
  std::atomic<int64_t> stalled_nanos_{0};
  std::atomic<uint64_t> release_lag_{0};
  absl::Mutex release_mu_;
  ReleaseFunction release_ ABSL_GUARDED_BY(release_mu_);
  absl::Mutex mu_;
  std::deque<Request> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> readers_;
};

}  // namespace rocksort::store

#endif  // ROCKSORT_STORE_PREFETCH_FS_INTERNAL_H_
