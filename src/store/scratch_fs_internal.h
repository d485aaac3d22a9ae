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
// Thread-safety: as the wrapped file system.
#ifndef ROCKSORT_STORE_SCRATCH_FS_INTERNAL_H_
#define ROCKSORT_STORE_SCRATCH_FS_INTERNAL_H_

#include <memory>
#include <string>

#include "rocksdb/file_system.h"

namespace rocksort::store {

class ScratchFileSystem : public rocksdb::FileSystemWrapper {
 public:
  explicit ScratchFileSystem(std::shared_ptr<rocksdb::FileSystem> target)
      : rocksdb::FileSystemWrapper(std::move(target)) {}

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
  rocksdb::IOStatus NewDirectory(const std::string& name, const rocksdb::IOOptions& options,
                                 std::unique_ptr<rocksdb::FSDirectory>* result,
                                 rocksdb::IODebugContext* dbg) override;
};

}  // namespace rocksort::store

#endif  // ROCKSORT_STORE_SCRATCH_FS_INTERNAL_H_
