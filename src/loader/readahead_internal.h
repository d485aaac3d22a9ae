// File: loader/readahead_internal.h  (internal to loader/ and its tests)
// -----------------------------------------------------------------------------
// Keeps the kernel reading a file in large chunks ahead of a sequential
// reader. The kernel's own readahead for a plain read() loop grows only to
// the device's read_ahead_kb (128 KiB on a stock disk), so a 2 GiB input costs
// ~16,000 requests: 110 s at a rotating disk's ~150 requests/s, more than
// decoding the file takes. SequentialReadahead watches the reader's file
// offset from a thread of its own and reads the next `window` bytes in
// `chunk`-sized reads, into a buffer it throws away: the data lands in the
// page cache, where the reader finds it. A read of a chunk is issued as
// requests as large as the device takes; the same range advised with
// POSIX_FADV_WILLNEED was read in requests of a few hundred KiB (measured
// on the emulated disk of tools/hdd_emulation.sh, where every request costs
// the time of a seek). What the
// reader left a window behind is dropped from the page cache
// (POSIX_FADV_DONTNEED): it is never read again, and a streaming input of
// hundreds of GiB would otherwise push the freshly flushed runs, which the
// merges read moments later, out of the cache.
//
// Owns: one thread. Does not own the file descriptor, which must stay open
// until Stop() or destruction. Thread-safety: construct, Stop and destroy
// from one thread; the reader may use the descriptor concurrently (only its
// offset is read, with lseek(SEEK_CUR)).
#ifndef ROCKSORT_LOADER_READAHEAD_INTERNAL_H_
#define ROCKSORT_LOADER_READAHEAD_INTERNAL_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

namespace rocksort::loader {

class SequentialReadahead {
 public:
  // Starts the thread for the regular file open as `fd`, `file_size` bytes
  // long. REQUIRES: chunk > 0, window >= chunk.
  SequentialReadahead(int fd, uint64_t file_size, uint64_t window = uint64_t{16} << 20,
                      uint64_t chunk = uint64_t{2} << 20);
  SequentialReadahead(const SequentialReadahead&) = delete;
  SequentialReadahead& operator=(const SequentialReadahead&) = delete;
  ~SequentialReadahead() { Stop(); }

  // Stops and joins the thread. Idempotent.
  void Stop();

 private:
  void Run();

  const int fd_;
  int read_fd_ = -1;  // The thread's own description of the file (owned).
  const uint64_t file_size_;
  const uint64_t window_;
  const uint64_t chunk_;
  // What the thread reads into (and discards: the page cache keeps it).
  const std::unique_ptr<char[]> buffer_;
  // Polled every few milliseconds (a flag, not a condition variable: the
  // thread only sleeps between polls of the reader's offset anyway).
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace rocksort::loader

#endif  // ROCKSORT_LOADER_READAHEAD_INTERNAL_H_
