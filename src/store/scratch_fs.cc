#include "store/scratch_fs_internal.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/thread_usage.h"

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

// An UnsyncedFile that is not written back early either.
class DeferredFile : public UnsyncedFile {
 public:
  using UnsyncedFile::UnsyncedFile;

  rocksdb::IOStatus RangeSync(uint64_t /*offset*/, uint64_t /*nbytes*/,
                              const rocksdb::IOOptions& /*options*/,
                              rocksdb::IODebugContext* /*dbg*/) override {
    return rocksdb::IOStatus::OK();
  }
};

// A deferred file's reader: dropping its pages from the cache would write
// them back first, so it is not done (the pages go with the file).
class KeptInCacheFile : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  using rocksdb::FSRandomAccessFileOwnerWrapper::FSRandomAccessFileOwnerWrapper;

  rocksdb::IOStatus InvalidateCache(size_t /*offset*/, size_t /*length*/) override {
    return rocksdb::IOStatus::OK();
  }
};

// A table file written with O_DIRECT: an UnsyncedFile whose writes, each
// of which waits for the disk, are counted and timed.
class MeteredFile : public UnsyncedFile {
 public:
  MeteredFile(std::unique_ptr<rocksdb::FSWritableFile> target, std::atomic<uint64_t>* bytes,
              std::atomic<int64_t>* nanos)
      : UnsyncedFile(std::move(target)), bytes_(bytes), nanos_(nanos) {}

  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    return Timed(data.size(), [&] { return UnsyncedFile::Append(data, options, dbg); });
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    return Timed(data.size(), [&] { return UnsyncedFile::Append(data, options, info, dbg); });
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     rocksdb::IODebugContext* dbg) override {
    return Timed(data.size(),
                 [&] { return UnsyncedFile::PositionedAppend(data, offset, options, dbg); });
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     const rocksdb::DataVerificationInfo& info,
                                     rocksdb::IODebugContext* dbg) override {
    return Timed(data.size(),
                 [&] { return UnsyncedFile::PositionedAppend(data, offset, options, info, dbg); });
  }

 private:
  template <typename Write>
  rocksdb::IOStatus Timed(size_t size, Write write) {
    const absl::Time start = absl::Now();
    rocksdb::IOStatus s = write();
    if (s.ok()) {
      nanos_->fetch_add(absl::ToInt64Nanoseconds(absl::Now() - start), std::memory_order_relaxed);
      bytes_->fetch_add(size, std::memory_order_relaxed);
    }
    return s;
  }

  std::atomic<uint64_t>* const bytes_;
  std::atomic<int64_t>* const nanos_;
};

// Wraps what `s` opened into *result.
rocksdb::IOStatus Unsynced(rocksdb::IOStatus s, std::unique_ptr<rocksdb::FSWritableFile>* result,
                           bool deferred = false) {
  if (!s.ok() || *result == nullptr) return s;
  *result = deferred ? std::make_unique<DeferredFile>(std::move(*result))
                     : std::make_unique<UnsyncedFile>(std::move(*result));
  return s;
}

}  // namespace

ScratchFileSystem::ScratchFileSystem(std::shared_ptr<rocksdb::FileSystem> target)
    : rocksdb::FileSystemWrapper(std::move(target)) {
  deleter_ = std::thread([this] {
    SetThreadName("rs-delete");
    DeleteLoop();
  });
}

ScratchFileSystem::~ScratchFileSystem() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  deleter_.join();
}

rocksdb::IOStatus ScratchFileSystem::DeleteFile(const std::string& fname,
                                                const rocksdb::IOOptions& options,
                                                rocksdb::IODebugContext* dbg) {
  if (!absl::EndsWith(fname, ".sst")) return target()->DeleteFile(fname, options, dbg);
  {
    absl::MutexLock lock(&deferred_mu_);
    deferred_.erase(fname);
  }
  // RocksDB only deletes a table it no longer reads, and never reuses its
  // name; a missing file is reported now, as the unlink would.
  if (::access(fname.c_str(), F_OK) != 0) return target()->DeleteFile(fname, options, dbg);
  absl::MutexLock lock(&mu_);
  // Its releases are moot now.
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [&fname](const Job& job) { return job.path == fname; }),
                 pending_.end());
  pending_.push_back({fname, 0, 0});
  return rocksdb::IOStatus::OK();
}

bool ScratchFileSystem::DropCachedPages(const std::string& fname) {
  const int fd = ::open(fname.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  return true;
}

void ScratchFileSystem::ReleaseRange(const std::string& fname, uint64_t offset, uint64_t length) {
  if (length == 0) return;
  absl::MutexLock lock(&mu_);
  if (!can_punch_ || stop_) return;
  pending_.push_back({fname, offset, length});
}

void ScratchFileSystem::WaitForDeletes() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](ScratchFileSystem* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
        return self->pending_.empty() && !self->deleting_;
      },
      this));
}

void ScratchFileSystem::DeleteLoop() {
  for (;;) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      deleting_ = false;
      mu_.Await(absl::Condition(
          +[](ScratchFileSystem* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->stop_ || !self->pending_.empty();
          },
          this));
      if (pending_.empty()) return;  // Stopping, nothing left.
      job = std::move(pending_.front());
      pending_.pop_front();
      deleting_ = true;
    }
    if (job.length == 0) {
      // Scratch space: a file that cannot be unlinked is left for the
      // directory's removal at the end (TempDb::Destroy reports what stays).
      (void)::unlink(job.path.c_str());
      continue;
    }
    const int fd = ::open(job.path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) continue;  // Deleted meanwhile.
    if (::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(job.offset),
                    static_cast<off_t>(job.length)) == 0) {
      released_.fetch_add(job.length, std::memory_order_relaxed);
    } else if (errno == EOPNOTSUPP || errno == ENOSYS) {
      absl::MutexLock lock(&mu_);
      can_punch_ = false;  // The deletes at the end free the space instead.
    }
    ::close(fd);
  }
}

void ScratchFileSystem::DeferWriteback(const std::string& fname) {
  absl::MutexLock lock(&deferred_mu_);
  deferred_.insert(fname);
}

bool ScratchFileSystem::IsDeferred(const std::string& fname) {
  absl::MutexLock lock(&deferred_mu_);
  return deferred_.count(fname) > 0;
}

rocksdb::IOStatus ScratchFileSystem::NewWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = target()->NewWritableFile(fname, options, result, dbg);
  if (s.ok() && *result != nullptr && options.use_direct_writes && absl::EndsWith(fname, ".sst")) {
    *result = std::make_unique<MeteredFile>(std::move(*result), &direct_bytes_, &direct_nanos_);
    return s;
  }
  return Unsynced(std::move(s), result, IsDeferred(fname));
}

ScratchFileSystem::DirectWrites ScratchFileSystem::direct_writes() const {
  return {direct_bytes_.load(std::memory_order_relaxed),
          direct_nanos_.load(std::memory_order_relaxed) / 1e9};
}

rocksdb::IOStatus ScratchFileSystem::NewRandomAccessFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSRandomAccessFile>* result, rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = target()->NewRandomAccessFile(fname, options, result, dbg);
  if (s.ok() && *result != nullptr && IsDeferred(fname)) {
    *result = std::make_unique<KeptInCacheFile>(std::move(*result));
  }
  return s;
}

void FreshRunListener::OnTableFileCreationStarted(const rocksdb::TableFileCreationBriefInfo& info) {
  if (info.reason == rocksdb::TableFileCreationReason::kFlush &&
      enabled_.load(std::memory_order_relaxed)) {
    fs_->DeferWriteback(info.file_path);
  }
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
