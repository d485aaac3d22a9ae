#include "loader/readahead_internal.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/thread_usage.h"

namespace rocksort::loader {

SequentialReadahead::SequentialReadahead(int fd, uint64_t file_size, uint64_t window,
                                         uint64_t chunk)
    : fd_(fd), file_size_(file_size), window_(window), chunk_(chunk) {
  thread_ = std::thread([this] {
    SetThreadName("rs-readahead");
    Run();
  });
}

void SequentialReadahead::Stop() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

void SequentialReadahead::Run() {
  uint64_t requested = 0;  // Everything below this offset has been asked for.
  uint64_t dropped = 0;    // Everything below this offset has been dropped.
  while (!stop_.load(std::memory_order_relaxed) && requested < file_size_) {
    const off_t offset = ::lseek(fd_, 0, SEEK_CUR);
    if (offset < 0) return;  // Not seekable after all: nothing to do.
    // Clean pages only (the input is read, never written): nothing is lost.
    if (static_cast<uint64_t>(offset) >= dropped + window_ + chunk_) {
      const uint64_t end = static_cast<uint64_t>(offset) - window_;
      ::posix_fadvise(fd_, static_cast<off_t>(dropped), static_cast<off_t>(end - dropped),
                      POSIX_FADV_DONTNEED);
      dropped = end;
    }
    // A reader that seeked forward (or read faster) makes older requests moot.
    requested = std::max(requested, static_cast<uint64_t>(offset));
    const uint64_t target = std::min(file_size_, static_cast<uint64_t>(offset) + window_);
    while (requested < target) {
      const uint64_t len = std::min(chunk_, file_size_ - requested);
      // Advisory: an error (say, a filesystem without readahead) only means
      // the reader falls back to the kernel's own readahead.
      if (::posix_fadvise(fd_, static_cast<off_t>(requested), static_cast<off_t>(len),
                          POSIX_FADV_WILLNEED) != 0) {
        return;
      }
      requested += len;
    }
    // Poll the reader's progress: a few ms is far less than the time a
    // window lasts (16 MiB at hundreds of MB/s).
    absl::SleepFor(absl::Milliseconds(5));
  }
}

}  // namespace rocksort::loader
