// File: store/scratch_fs_internal.h  (internal to store/ and its tests)
// -----------------------------------------------------------------------------
// The file system under the temporary database: the default one, except
// that nothing is ever made durable.
//
// RocksDB syncs as a database must: each run when it is written (fdatasync),
// the MANIFEST after each flush and merge, and the directory after each new
// file (fsync). A sort's database is scratch: it is deleted at the end, on
// an error and on a signal, and after a crash nothing reads it again. Each
// sync still waits for the disk to write the file and flush its cache,
// about 7 ms per fdatasync even on the unthrottled disk (measured with
// strace), and it happens in the flush and merge threads, on the load's
// critical path, a few thousand times in a large sort. Here Sync and Fsync
// of files and directories do nothing.
//
// What stays: RangeSync (bytes_per_sync), which starts writeback early and
// does not wait for it, so that written runs become clean pages the page
// cache can drop. An I/O error that a sync would have reported instead
// surfaces when the data is read back: every block carries a checksum
// (verified on every read), and the records' checksum (common/
// record_checksum.h) compares what was loaded with what was written.
//
// Nor does deleting a run wait: RocksDB deletes merged runs in the thread
// that merged them, and on a filesystem mounted with `discard` an unlink
// waits for the device to discard the file's blocks (measured: the merge
// thread's longest waits while loading). Table files (*.sst) are unlinked
// by a thread of this file system instead; DeleteFile returns at once.
// WaitForDeletes() returns once every file handed over is gone.
//
// The same thread frees parts of a run that its last reader has passed
// (ReleaseRange: a hole punched in the file). The final merge reads every
// run once, front to back, and the runs are deleted only after it; on a
// filesystem mounted with `discard` deleting gigabytes of runs then waits
// for the device at the very end (measured: ~7 s for 4.5 GB). Released
// while the merge goes on, the space is discarded while the compressors
// work, and the deletes at the end find little left.
//
// Fresh runs that merges read moments after their flush need not reach the
// disk at all: DeferWriteback(name) before the file is created (the store's
// listener calls it when a flush starts a table, FreshRunListener) makes its
// RangeSync calls do nothing, and its readers' InvalidateCache too (the
// prefetching file system drops what a merge has read, and dropping dirty
// pages, POSIX_FADV_DONTNEED, first writes them back: measured, ~7 GB of
// fresh runs written at -m 8M). So its pages stay dirty in the page cache
// until the merge that reads them deletes the file, and the kernel never
// writes them unless it runs short of memory or the run outlives the
// dirty-page expiry (30 s by default). Merged runs and the fresh runs of a
// sort that does not merge while loading are written back as above.
//
// Thread-safety: as the wrapped file system; thread-safe.
#ifndef ROCKSORT_STORE_SCRATCH_FS_INTERNAL_H_
#define ROCKSORT_STORE_SCRATCH_FS_INTERNAL_H_

#include <atomic>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "rocksdb/file_system.h"
#include "rocksdb/listener.h"

namespace rocksort::store {

class ScratchFileSystem : public rocksdb::FileSystemWrapper {
 public:
  explicit ScratchFileSystem(std::shared_ptr<rocksdb::FileSystem> target);
  ~ScratchFileSystem() override;  // Deletes what is pending, then stops.

  static const char* kClassName() { return "RocksortScratchFileSystem"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus NewWritableFile(const std::string& fname, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& fname,
                                       const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& fname, const std::string& old_fname,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSWritableFile>* result,
                                      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomAccessFile(const std::string& fname,
                                        const rocksdb::FileOptions& options,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* result,
                                        rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewDirectory(const std::string& name, const rocksdb::IOOptions& options,
                                 std::unique_ptr<rocksdb::FSDirectory>* result,
                                 rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteFile(const std::string& fname, const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;

  // Until every file DeleteFile handed to the deleting thread is deleted
  // (and every range ReleaseRange handed over is released).
  void WaitForDeletes();

  // Frees [offset, offset + length) of table file `fname` in the deleting
  // thread (a hole: reads there return zeros; the size stays). A release
  // still pending when the file is deleted is dropped. Advice: on a
  // filesystem that cannot punch holes, or a file gone meanwhile, nothing
  // happens.
  void ReleaseRange(const std::string& fname, uint64_t offset, uint64_t length);
  // The bytes released so far, for the report.
  uint64_t released_bytes() const { return released_.load(std::memory_order_relaxed); }

  // The file `fname`, once created and until deleted, is not written back
  // early: its RangeSync and its readers' InvalidateCache do nothing (see
  // above).
  void DeferWriteback(const std::string& fname);

  // Table files written with O_DIRECT: the bytes written so far and the
  // wall time their writes took, each waiting for the disk (how fast the
  // disk takes runs: the store's choice of uncompressed runs).
  struct DirectWrites {
    uint64_t bytes = 0;
    double seconds = 0;
  };
  DirectWrites direct_writes() const;

  // Drops the pages of file `fname` from the page cache
  // (POSIX_FADV_DONTNEED): the clean ones go, dirty ones are written back
  // and stay. Returns false if the file could not be opened. Advice: the
  // file's contents do not change.
  static bool DropCachedPages(const std::string& fname);

 private:
  void DeleteLoop();
  // Whether `fname` was named by DeferWriteback (until it is deleted).
  bool IsDeferred(const std::string& fname);

  absl::Mutex deferred_mu_;
  std::set<std::string> deferred_ ABSL_GUARDED_BY(deferred_mu_);
  // A file to unlink (length 0) or a range of it to release.
  struct Job {
    std::string path;
    uint64_t offset = 0;
    uint64_t length = 0;
  };
  absl::Mutex mu_;
  std::deque<Job> pending_ ABSL_GUARDED_BY(mu_);
  bool deleting_ ABSL_GUARDED_BY(mu_) = false;  // The thread is working on a job.
  bool can_punch_ ABSL_GUARDED_BY(mu_) = true;  // Until the filesystem says otherwise.
  std::atomic<uint64_t> released_{0};
  std::atomic<uint64_t> direct_bytes_{0};
  std::atomic<int64_t> direct_nanos_{0};
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread deleter_;
};

// Tells `fs` to defer the writeback of every table a flush creates, when
// `enabled` is true at the time (the store enables it while every fresh run
// is merged while loading). RocksDB announces a table to its listeners
// before it creates the file.
class FreshRunListener : public rocksdb::EventListener {
 public:
  explicit FreshRunListener(std::shared_ptr<ScratchFileSystem> fs) : fs_(std::move(fs)) {}
  const char* Name() const override { return "RocksortFreshRunListener"; }
  void set_enabled(bool enabled) { enabled_.store(enabled, std::memory_order_relaxed); }
  void OnTableFileCreationStarted(const rocksdb::TableFileCreationBriefInfo& info) override;

 private:
  const std::shared_ptr<ScratchFileSystem> fs_;
  std::atomic<bool> enabled_{false};
};

}  // namespace rocksort::store

#endif  // ROCKSORT_STORE_SCRATCH_FS_INTERNAL_H_
