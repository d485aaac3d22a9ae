// File: common/open_files.h
// -----------------------------------------------------------------------------
// How many more files this process may open: its open-file limit
// (RLIMIT_NOFILE) less the descriptors it holds now. Inputs that cannot be
// closed and opened again (FIFOs, stdin) hold theirs all through the load,
// beside the runs RocksDB keeps open, so the store is planned with what is
// left rather than with the limit.
//
// Thread-safe (getrlimit and a read of /proc/self/fd).
#ifndef ROCKSORT_COMMON_OPEN_FILES_H_
#define ROCKSORT_COMMON_OPEN_FILES_H_

#include <cstdint>
#include <string>

namespace rocksort {

struct OpenFiles {
  // The soft limit, 0 if unlimited or unknown.
  uint64_t limit = 0;
  // Descriptors open now, 0 if `fd_dir` can't be read.
  uint64_t in_use = 0;

  // limit - in_use, at least 0; meaningless when limit is 0.
  uint64_t free() const { return limit > in_use ? limit - in_use : 0; }
};

// `fd_dir` is "/proc/self/fd" except in tests, which may also pass a limit
// (0: getrlimit's).
OpenFiles CountOpenFiles(const std::string& fd_dir = "/proc/self/fd", uint64_t limit = 0);

}  // namespace rocksort

#endif  // ROCKSORT_COMMON_OPEN_FILES_H_
