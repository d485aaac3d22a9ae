#include "store/prefetch_fs_internal.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/page_cache.h"
#include "common/thread_usage.h"

namespace rocksort::store {
namespace {

constexpr uint64_t kPage = 4096;
// What a reader has passed is dropped in steps of at least this much, so
// that a run of small reads does not make one DONTNEED call per block. Not
// in whole folios: a final merge of hundreds of runs would keep up to a
// folio behind each reader (265 runs at -m 32M, more than the cgroup held).
constexpr uint64_t kDropStep = 256 * 1024;
// What a reader has passed is released in steps of at least this much: few
// calls, each discarding a sizeable extent.
constexpr uint64_t kReleaseStep = 4 * 1024 * 1024;
// A reader's read that takes longer than this waited for the disk: a copy
// of a block from the page cache takes tens of microseconds.
constexpr absl::Duration kStalledRead = absl::Microseconds(500);

// A table file whose sequential reader is kept ahead of the disk. Dropping
// behind goes through the file's own descriptor: the POSIX file's
// InvalidateCache is POSIX_FADV_DONTNEED.
class PrefetchingFile : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  PrefetchingFile(std::unique_ptr<rocksdb::FSRandomAccessFile> target, std::string path,
                  uint64_t size, PrefetchFileSystem* fs)
      : rocksdb::FSRandomAccessFileOwnerWrapper(std::move(target)),
        path_(std::make_shared<const std::string>(std::move(path))),
        size_(size),
        fs_(fs) {}

  rocksdb::IOStatus Read(uint64_t offset, size_t n, const rocksdb::IOOptions& options,
                         rocksdb::Slice* result, char* scratch,
                         rocksdb::IODebugContext* dbg) const override {
    // Before the read: what comes after it is on its way while this read
    // waits (if it waits at all).
    Advance(offset, n);
    const absl::Time start = absl::Now();
    rocksdb::IOStatus s =
        FSRandomAccessFileOwnerWrapper::Read(offset, n, options, result, scratch, dbg);
    const absl::Duration took = absl::Now() - start;
    if (took > kStalledRead) fs_->CountStalledRead(took);
    ReleaseBehind(offset, n);
    return s;
  }

 private:
  void ReleaseBehind(uint64_t offset, uint64_t n) const {
    const uint64_t lag = fs_->release_lag();
    if (lag == 0) return;
    absl::MutexLock lock(&mu_);
    // Only a read that continues the previous one: the scan of the data
    // blocks, not a read of the table's metadata.
    const bool continues = offset == read_end_;
    read_end_ = offset + n;
    if (!continues || offset < lag) return;
    const uint64_t end = (offset - lag) & ~(kPage - 1);
    if (end >= released_ + kReleaseStep) {
      fs_->Release(*path_, released_, end - released_);
      released_ = end;
    }
  }

  void Advance(uint64_t offset, uint64_t n) const {
    const PrefetchFileSystem::Settings settings = fs_->settings();
    if (settings.chunk == 0 || size_ == 0) return;
    absl::MutexLock lock(&mu_);
    // Outside the current window (the first read, a table's metadata at its
    // end, a seek): a new window starts here.
    if (!window_open_ || offset < window_start_ || offset > queued_ + settings.chunk) {
      window_open_ = true;
      window_start_ = offset & ~(kPage - 1);
      dropped_ = window_start_;
      // The reader needs this now: read it in one request here rather than
      // wait for the queue (at the start of a merge every run starts a
      // window at once) or read it a block at a time. In the final merge
      // its length staggers the runs' chunk ends (see the header).
      queued_ = std::min(size_, window_start_ + fs_->NextFirstRead(settings));
      ReadIntoCache(window_start_, queued_ - window_start_);
    }
    // Ahead: once the reader is within `lead` of what was queued, the next
    // chunk is queued.
    const uint64_t want = std::min(size_, offset + n + settings.lead);
    while (queued_ < want) {
      const uint64_t length = std::min(settings.chunk, size_ - queued_);
      fs_->Enqueue(path_, queued_, length);
      queued_ += length;
    }
    // Behind: the pages before this read are never read again.
    const uint64_t passed = offset & ~(kPage - 1);
    if (passed >= dropped_ + kDropStep) {
      // From the folio boundary below the last drop's end: a large folio
      // across that end, which the last drop kept (common/page_cache.h), is
      // behind the reader once it has passed the folio's end.
      const uint64_t from = FolioFloor(dropped_);
      target()->InvalidateCache(from, passed - from).PermitUncheckedError();
      dropped_ = passed;
    }
  }

  // Reads [offset, offset + length) into a scratch buffer of this thread's,
  // so that it lands in the page cache.
  void ReadIntoCache(uint64_t offset, uint64_t length) const {
    thread_local std::unique_ptr<char[]> scratch;
    thread_local uint64_t capacity = 0;
    if (length > capacity) {
      scratch.reset(new char[length]);
      capacity = length;
    }
    rocksdb::Slice result;
    target()
        ->Read(offset, length, rocksdb::IOOptions(), &result, scratch.get(), nullptr)
        .PermitUncheckedError();
  }

  const std::shared_ptr<const std::string> path_;
  const uint64_t size_;
  PrefetchFileSystem* const fs_;
  mutable absl::Mutex mu_;
  mutable bool window_open_ ABSL_GUARDED_BY(mu_) = false;
  mutable uint64_t window_start_ ABSL_GUARDED_BY(mu_) = 0;
  mutable uint64_t queued_ ABSL_GUARDED_BY(mu_) = 0;   // Queued for reading up to here.
  mutable uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;  // Dropped below here.
  // Releasing behind: where the last read ended, and what is released.
  mutable uint64_t read_end_ ABSL_GUARDED_BY(mu_) = 0;
  mutable uint64_t released_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

PrefetchFileSystem::PrefetchFileSystem(std::shared_ptr<rocksdb::FileSystem> target, int readers)
    : rocksdb::FileSystemWrapper(target) {
  for (int i = 0; i < std::max(1, readers); ++i) {
    readers_.emplace_back([this] {
      SetThreadName("rs-prefetch");
      ReaderLoop();
    });
  }
}

PrefetchFileSystem::~PrefetchFileSystem() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : readers_) t.join();
}

void PrefetchFileSystem::SetReadahead(uint64_t chunk, uint64_t lead, FirstRead first_read) {
  chunk_.store(chunk, std::memory_order_relaxed);
  lead_.store(lead, std::memory_order_relaxed);
  first_read_.store(first_read, std::memory_order_relaxed);
}

void PrefetchFileSystem::SetReleaseBehind(uint64_t lag, ReleaseFunction release) {
  absl::MutexLock lock(&release_mu_);
  release_ = std::move(release);
  release_lag_.store(release_ ? lag : 0, std::memory_order_release);
}

void PrefetchFileSystem::Release(const std::string& path, uint64_t offset, uint64_t length) {
  absl::MutexLock lock(&release_mu_);
  if (release_) release_(path, offset, length);
}

void PrefetchFileSystem::CountStalledRead(absl::Duration took) {
  stalled_reads_.fetch_add(1, std::memory_order_relaxed);
  stalled_nanos_.fetch_add(absl::ToInt64Nanoseconds(took), std::memory_order_relaxed);
}

PrefetchFileSystem::ReadStalls PrefetchFileSystem::read_stalls() const {
  return {stalled_reads_.load(std::memory_order_relaxed),
          stalled_nanos_.load(std::memory_order_relaxed) / 1e9};
}

PrefetchFileSystem::Settings PrefetchFileSystem::settings() const {
  return {chunk_.load(std::memory_order_relaxed), lead_.load(std::memory_order_relaxed),
          first_read_.load(std::memory_order_relaxed)};
}

uint64_t PrefetchFileSystem::NextFirstRead(const Settings& settings) {
  // Up to a lead shorter than the chunk, or half a chunk, at once; the rest
  // of the chunk staggered.
  const uint64_t floor =
      settings.lead < settings.chunk ? settings.lead : (settings.chunk / 2) & ~(kPage - 1);
  if (settings.first_read == FirstRead::kWholeChunk || settings.chunk < 2 * kPage) {
    return settings.chunk;
  }
  // frac(n x (sqrt(5) - 1) / 2) in 32-bit fixed point: successive windows
  // land in the largest gap left by the ones before.
  constexpr uint64_t kGoldenFraction = 2654435769u;
  const uint64_t n = windows_.fetch_add(1, std::memory_order_relaxed) + 1;
  const uint64_t fraction = (n * kGoldenFraction) & 0xffffffffu;
  const uint64_t spread = settings.chunk - floor;
  const uint64_t extra = ((spread >> 12) * fraction >> 32) << 12;
  return floor + extra;
}

void PrefetchFileSystem::Enqueue(std::shared_ptr<const std::string> path, uint64_t offset,
                                 uint64_t length) {
  absl::MutexLock lock(&mu_);
  queue_.push_back({std::move(path), offset, length});
}

void PrefetchFileSystem::ReaderLoop() {
  std::unique_ptr<char[]> buffer;
  uint64_t capacity = 0;
  for (;;) {
    Request request;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](PrefetchFileSystem* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->stop_ || !self->queue_.empty();
          },
          this));
      if (stop_) return;
      request = std::move(queue_.front());
      queue_.pop_front();
    }
    if (request.length > capacity) {
      capacity = request.length;
      buffer.reset(new char[capacity]);
    }
    // Advisory: a file deleted meanwhile (a merge's input) or a failed read
    // only means its reader reads from the disk itself.
    const int fd = ::open(request.path->c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    // Exactly the chunk: without this the kernel's own readahead, its
    // window up to read_ahead_kb, comes on top of every read.
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
    uint64_t done = 0;
    while (done < request.length) {
      const ssize_t r = ::pread(fd, buffer.get(), request.length - done,
                                static_cast<off_t>(request.offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      done += static_cast<uint64_t>(r);
    }
    ::close(fd);
    prefetched_.fetch_add(done, std::memory_order_relaxed);
  }
}

rocksdb::IOStatus PrefetchFileSystem::NewRandomAccessFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSRandomAccessFile>* result, rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = target()->NewRandomAccessFile(fname, options, result, dbg);
  if (!s.ok() || !absl::EndsWith(fname, ".sst") || options.use_direct_reads) return s;
  uint64_t size = 0;
  // Without its size the file is read without prefetching.
  if (!target()->GetFileSize(fname, rocksdb::IOOptions(), &size, dbg).ok()) return s;
  *result = std::make_unique<PrefetchingFile>(std::move(*result), fname, size, this);
  return s;
}

}  // namespace rocksort::store
