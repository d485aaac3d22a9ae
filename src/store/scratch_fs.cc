#include "store/scratch_fs_internal.h"

#include <utility>

namespace rocksort::store {
namespace {

// A file whose Sync and Fsync return at once; everything else, RangeSync
// included, reaches the file.
class UnsyncedFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  explicit UnsyncedFile(std::unique_ptr<rocksdb::FSWritableFile> target)
      : rocksdb::FSWritableFileOwnerWrapper(std::move(target)) {}

  rocksdb::IOStatus Sync(const rocksdb::IOOptions& /*options*/,
                         rocksdb::IODebugContext* /*dbg*/) override {
    return rocksdb::IOStatus::OK();
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& /*options*/,
                          rocksdb::IODebugContext* /*dbg*/) override {
    return rocksdb::IOStatus::OK();
  }
  bool IsSyncThreadSafe() const override { return true; }
};

class UnsyncedDirectory : public rocksdb::FSDirectoryWrapper {
 public:
  explicit UnsyncedDirectory(std::unique_ptr<rocksdb::FSDirectory> target)
      : rocksdb::FSDirectoryWrapper(std::move(target)) {}

  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& /*options*/,
                          rocksdb::IODebugContext* /*dbg*/) override {
    return rocksdb::IOStatus::OK();
  }
  rocksdb::IOStatus FsyncWithDirOptions(const rocksdb::IOOptions& /*options*/,
                                        rocksdb::IODebugContext* /*dbg*/,
                                        const rocksdb::DirFsyncOptions& /*dir_options*/) override {
    return rocksdb::IOStatus::OK();
  }
};

// Wraps what `s` opened into *result.
rocksdb::IOStatus Unsynced(rocksdb::IOStatus s, std::unique_ptr<rocksdb::FSWritableFile>* result) {
  if (s.ok() && *result != nullptr) *result = std::make_unique<UnsyncedFile>(std::move(*result));
  return s;
}

}  // namespace

rocksdb::IOStatus ScratchFileSystem::NewWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  return Unsynced(target()->NewWritableFile(fname, options, result, dbg), result);
}

rocksdb::IOStatus ScratchFileSystem::ReopenWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  return Unsynced(target()->ReopenWritableFile(fname, options, result, dbg), result);
}

rocksdb::IOStatus ScratchFileSystem::ReuseWritableFile(
    const std::string& fname, const std::string& old_fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  return Unsynced(target()->ReuseWritableFile(fname, old_fname, options, result, dbg), result);
}

rocksdb::IOStatus ScratchFileSystem::NewDirectory(const std::string& name,
                                                  const rocksdb::IOOptions& options,
                                                  std::unique_ptr<rocksdb::FSDirectory>* result,
                                                  rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = target()->NewDirectory(name, options, result, dbg);
  if (s.ok() && *result != nullptr) {
    *result = std::make_unique<UnsyncedDirectory>(std::move(*result));
  }
  return s;
}

}  // namespace rocksort::store
