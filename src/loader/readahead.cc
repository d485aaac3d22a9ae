#include "loader/readahead_internal.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/page_cache.h"
#include "common/thread_usage.h"

namespace rocksort::loader {

SequentialReadahead::SequentialReadahead(int fd, uint64_t file_size, uint64_t window,
                                         uint64_t chunk)
    : fd_(fd), file_size_(file_size), window_(window), chunk_(chunk), buffer_(new char[chunk]) {
  // A file description of its own, told not to read ahead: a read of a
  // chunk then reads that chunk, not the kernel's growing window on top
  // (read_ahead_kb, 8 MiB on some disks), and the reader's description
  // keeps its own readahead state. /proc/self/fd reopens the same file.
  read_fd_ = ::open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_RDONLY | O_CLOEXEC);
  if (read_fd_ >= 0) ::posix_fadvise(read_fd_, 0, 0, POSIX_FADV_RANDOM);
  thread_ = std::thread([this] {
    SetThreadName("rs-readahead");
    Run();
  });
}

void SequentialReadahead::Stop() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
  if (read_fd_ >= 0) ::close(read_fd_);
  read_fd_ = -1;
}

void SequentialReadahead::Run() {
  uint64_t requested = 0;  // Everything below this offset has been asked for.
  uint64_t dropped = 0;    // Everything below this offset has been dropped.
  while (!stop_.load(std::memory_order_relaxed) && requested < file_size_) {
    const off_t offset = ::lseek(fd_, 0, SEEK_CUR);
    if (offset < 0) return;  // Not seekable after all: nothing to do.
    // Clean pages only (the input is read, never written): nothing is lost.
    // Whole folios (common/page_cache.h), or the one across each end stays.
    const uint64_t end = FolioFloor(
        static_cast<uint64_t>(offset) > window_ ? static_cast<uint64_t>(offset) - window_ : 0);
    if (end >= dropped + chunk_) {
      ::posix_fadvise(fd_, static_cast<off_t>(dropped), static_cast<off_t>(end - dropped),
                      POSIX_FADV_DONTNEED);
      dropped = end;
    }
    // A reader that seeked forward (or read faster) makes older requests moot.
    requested = std::max(requested, static_cast<uint64_t>(offset));
    const uint64_t target = std::min(file_size_, static_cast<uint64_t>(offset) + window_);
    while (requested < target && !stop_.load(std::memory_order_relaxed)) {
      const uint64_t len = std::min(chunk_, file_size_ - requested);
      // Read, not POSIX_FADV_WILLNEED: the kernel reads an advised range in
      // requests of a few hundred KiB, a read of `chunk_` in requests as
      // large as the device takes (measured on the emulated disk: 2 MiB
      // reads made 1.2 MiB requests, 2 MiB of advice 0.6 MiB ones). What is
      // read lands in the page cache, where the reader finds it. An error
      // only means the reader reads that part itself.
      const ssize_t n = ::pread(read_fd_ >= 0 ? read_fd_ : fd_, buffer_.get(), len,
                                static_cast<off_t>(requested));
      if (n <= 0) return;
      requested += static_cast<uint64_t>(n);
    }
    // Poll the reader's progress: a few ms is far less than the time a
    // window lasts (16 MiB at hundreds of MB/s).
    absl::SleepFor(absl::Milliseconds(5));
  }
}

}  // namespace rocksort::loader
