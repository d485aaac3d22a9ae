#include "store/scratch_fs_internal.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/thread_usage.h"

namespace rocksort::store {

// The queue of table writes, its buffers and the rs-runwrite thread.
class ScratchFileSystem::WriteBehind {
 public:
  // One file's share: the first error of its writes and how many of them
  // are queued. Guarded by WriteBehind::mu_; `target` is written only by
  // rs-runwrite while `queued` > 0.
  struct File {
    explicit File(rocksdb::FSWritableFile* t) : target(t) {}
    rocksdb::FSWritableFile* const target;
    rocksdb::IOStatus error;
    int queued = 0;
  };

  WriteBehind() {
    thread_ = std::thread([this] {
      SetThreadName("rs-runwrite");
      Loop();
    });
  }
  // Writes what is queued, then stops.
  ~WriteBehind() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }

  // Queues a copy of `data` for `file`, once fewer than kWriteBehindBytes
  // (or nothing) are queued. Returns the file's first error so far.
  rocksdb::IOStatus Append(File* file, const rocksdb::Slice& data) {
    std::string buffer;
    {
      absl::MutexLock lock(&mu_);
      Room room{this, data.size()};
      mu_.Await(absl::Condition(&Room::Ready, &room));
      if (!file->error.ok()) return file->error;
      queued_bytes_ += data.size();
      ++file->queued;
      if (!free_.empty()) {
        buffer = std::move(free_.back());
        free_.pop_back();
      }
    }
    buffer.assign(data.data(), data.size());  // The copy, outside the lock.
    absl::MutexLock lock(&mu_);
    jobs_.push_back({file, std::move(buffer), 0, 0});
    return rocksdb::IOStatus::OK();
  }

  // Queues RangeSync(offset, nbytes) behind the file's writes so far.
  rocksdb::IOStatus RangeSync(File* file, uint64_t offset, uint64_t nbytes) {
    absl::MutexLock lock(&mu_);
    if (!file->error.ok()) return file->error;
    ++file->queued;
    jobs_.push_back({file, std::string(), offset, nbytes});
    return rocksdb::IOStatus::OK();
  }

  // Until nothing is queued for `file`. Returns its first error.
  rocksdb::IOStatus Drain(File* file) {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&Idle, file));
    return file->error;
  }

  rocksdb::IOStatus Error(File* file) {
    absl::MutexLock lock(&mu_);
    return file->error;
  }

 private:
  struct Job {
    File* file;
    std::string data;  // Empty for a RangeSync.
    uint64_t offset;
    uint64_t nbytes;
  };
  struct Room {
    static bool Ready(Room* r) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return r->self->queued_bytes_ == 0 || r->self->queued_bytes_ + r->size <= kWriteBehindBytes;
    }
    WriteBehind* self;
    uint64_t size;
  };
  static bool Idle(File* f) { return f->queued == 0; }

  void Loop();

  absl::Mutex mu_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> free_ ABSL_GUARDED_BY(mu_);  // Buffers to reuse.
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

void ScratchFileSystem::WriteBehind::Loop() {
  for (;;) {
    Job job;
    bool failed;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](WriteBehind* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->stop_ || !self->jobs_.empty();
          },
          this));
      if (jobs_.empty()) return;  // Stopping, nothing left.
      job = std::move(jobs_.front());
      jobs_.pop_front();
      failed = !job.file->error.ok();
    }
    // After a failed write the file's later writes are dropped: what it
    // holds is already wrong, and the error is what RocksDB sees.
    rocksdb::IOStatus s;
    if (!failed) {
      s = job.data.empty()  // A RangeSync: appends are never empty.
              ? job.file->target->RangeSync(job.offset, job.nbytes, rocksdb::IOOptions(), nullptr)
              : job.file->target->Append(job.data, rocksdb::IOOptions(), nullptr);
    }
    absl::MutexLock lock(&mu_);
    if (!s.ok() && job.file->error.ok()) job.file->error = s;
    --job.file->queued;
    if (!job.data.empty()) {
      queued_bytes_ -= job.data.size();
      // As many buffers as can be queued at once are kept.
      if (free_.size() < 8) free_.push_back(std::move(job.data));
    }
  }
}

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

// A table file written through the page cache, its writes made behind by
// rs-runwrite (scratch_fs_internal.h). Like DeferredFile when `deferred`.
// Everything that does not write data (preallocation, its trimming at
// Close) reaches the file at once: fallocate on the descriptor needs no
// order with the writes, and the file's own bookkeeping of it is not what
// Append changes.
class WrittenBehindFile : public rocksdb::FSWritableFile {
 public:
  WrittenBehindFile(std::unique_ptr<rocksdb::FSWritableFile> target,
                    ScratchFileSystem::WriteBehind* write_behind, bool deferred);
  ~WrittenBehindFile() override;  // Waits for the file's writes.

  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& /*options*/,
                           rocksdb::IODebugContext* /*dbg*/) override {
    return Queue(data);
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& /*options*/,
                           const rocksdb::DataVerificationInfo& /*info*/,
                           rocksdb::IODebugContext* /*dbg*/) override {
    return Queue(data);
  }
  rocksdb::IOStatus Flush(const rocksdb::IOOptions& options, rocksdb::IODebugContext* dbg) override;
  // Nothing is made durable (UnsyncedFile).
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options, rocksdb::IODebugContext* dbg) override {
    return Flush(options, dbg);
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options, rocksdb::IODebugContext* dbg) override {
    return Flush(options, dbg);
  }
  bool IsSyncThreadSafe() const override { return true; }
  rocksdb::IOStatus RangeSync(uint64_t offset, uint64_t nbytes, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus Close(const rocksdb::IOOptions& options, rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus Truncate(uint64_t size, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus InvalidateCache(size_t offset, size_t length) override;

  uint64_t GetFileSize(const rocksdb::IOOptions& /*options*/,
                       rocksdb::IODebugContext* /*dbg*/) override {
    return size_;
  }
  size_t GetRequiredBufferAlignment() const override {
    return target_->GetRequiredBufferAlignment();
  }
  void SetWriteLifeTimeHint(rocksdb::Env::WriteLifeTimeHint hint) override {
    target_->SetWriteLifeTimeHint(hint);
  }
  rocksdb::Env::WriteLifeTimeHint GetWriteLifeTimeHint() override {
    return target_->GetWriteLifeTimeHint();
  }
  void SetIOPriority(rocksdb::Env::IOPriority pri) override { target_->SetIOPriority(pri); }
  rocksdb::Env::IOPriority GetIOPriority() override { return target_->GetIOPriority(); }
  size_t GetUniqueId(char* id, size_t max_size) const override {
    return target_->GetUniqueId(id, max_size);
  }
  void SetPreallocationBlockSize(size_t size) override { target_->SetPreallocationBlockSize(size); }
  void GetPreallocationStatus(size_t* block_size, size_t* last_allocated_block) override {
    target_->GetPreallocationStatus(block_size, last_allocated_block);
  }
  void PrepareWrite(size_t offset, size_t len, const rocksdb::IOOptions& options,
                    rocksdb::IODebugContext* dbg) override {
    target_->PrepareWrite(offset, len, options, dbg);
  }
  rocksdb::IOStatus Allocate(uint64_t offset, uint64_t len, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
    return target_->Allocate(offset, len, options, dbg);
  }

 private:
  rocksdb::IOStatus Queue(const rocksdb::Slice& data);

  // Written by rs-runwrite while the file has writes queued, else here.
  const std::unique_ptr<rocksdb::FSWritableFile> target_;
  ScratchFileSystem::WriteBehind* const write_behind_;
  const bool deferred_;
  // What rs-runwrite shares with this file.
  const std::unique_ptr<ScratchFileSystem::WriteBehind::File> file_;
  uint64_t size_ = 0;  // Bytes appended.
};

WrittenBehindFile::WrittenBehindFile(std::unique_ptr<rocksdb::FSWritableFile> target,
                                     ScratchFileSystem::WriteBehind* write_behind, bool deferred)
    : target_(std::move(target)),
      write_behind_(write_behind),
      deferred_(deferred),
      file_(std::make_unique<ScratchFileSystem::WriteBehind::File>(target_.get())) {}

WrittenBehindFile::~WrittenBehindFile() { (void)write_behind_->Drain(file_.get()); }

rocksdb::IOStatus WrittenBehindFile::Queue(const rocksdb::Slice& data) {
  if (data.empty()) return write_behind_->Error(file_.get());
  rocksdb::IOStatus s = write_behind_->Append(file_.get(), data);
  if (s.ok()) size_ += data.size();
  return s;
}

rocksdb::IOStatus WrittenBehindFile::Flush(const rocksdb::IOOptions& /*options*/,
                                           rocksdb::IODebugContext* /*dbg*/) {
  return write_behind_->Error(file_.get());
}

rocksdb::IOStatus WrittenBehindFile::RangeSync(uint64_t offset, uint64_t nbytes,
                                               const rocksdb::IOOptions& /*options*/,
                                               rocksdb::IODebugContext* /*dbg*/) {
  if (deferred_ || nbytes == 0) return write_behind_->Error(file_.get());
  return write_behind_->RangeSync(file_.get(), offset, nbytes);
}

rocksdb::IOStatus WrittenBehindFile::Close(const rocksdb::IOOptions& options,
                                           rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = write_behind_->Drain(file_.get());
  rocksdb::IOStatus closed = target_->Close(options, dbg);
  return s.ok() ? closed : s;
}

rocksdb::IOStatus WrittenBehindFile::Truncate(uint64_t size, const rocksdb::IOOptions& options,
                                              rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = write_behind_->Drain(file_.get());
  if (!s.ok()) return s;
  s = target_->Truncate(size, options, dbg);
  if (s.ok()) size_ = size;
  return s;
}

rocksdb::IOStatus WrittenBehindFile::InvalidateCache(size_t offset, size_t length) {
  rocksdb::IOStatus s = write_behind_->Drain(file_.get());
  if (!s.ok()) return s;
  return target_->InvalidateCache(offset, length);
}

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
    : rocksdb::FileSystemWrapper(std::move(target)),
      write_behind_(std::make_unique<WriteBehind>()) {
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
  if (s.ok() && *result != nullptr && absl::EndsWith(fname, ".sst")) {
    *result = WrittenBehind(std::move(*result), IsDeferred(fname));
    return s;
  }
  return Unsynced(std::move(s), result, IsDeferred(fname));
}

std::unique_ptr<rocksdb::FSWritableFile> ScratchFileSystem::WrittenBehind(
    std::unique_ptr<rocksdb::FSWritableFile> file, bool deferred) {
  return std::make_unique<WrittenBehindFile>(std::move(file), write_behind_.get(), deferred);
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
