// File: common/memory_info.h
// -----------------------------------------------------------------------------
// How much file data the page cache can hold for this process: the least of
// the machine's MemAvailable (/proc/meminfo) and, for every memory cgroup
// the process sits in or under that has a limit, that limit less the
// cgroup's anonymous memory (cgroup v1: memory.limit_in_bytes and
// total_rss of memory.stat; v2: memory.max and anon). A cgroup's page cache
// counts against its limit, and its anonymous memory is what reclaim leaves
// alone when there is no swap.
//
// Best effort: files that are missing or unreadable (no cgroup, a cgroup
// namespace that hides the path, an unmounted controller) are skipped.
//
// Thread-safe (reads files only).
#ifndef ROCKSORT_COMMON_MEMORY_INFO_H_
#define ROCKSORT_COMMON_MEMORY_INFO_H_

#include <cstdint>
#include <string>

namespace rocksort {

struct CacheRoom {
  // Bytes of file data the page cache can hold, 0 if nothing was readable.
  uint64_t bytes = 0;
  // Where the figure comes from, e.g. "MemAvailable" or
  // "cgroup /bench/run1: limit 448 MiB, anon 96 MiB", for -v.
  std::string source;
};

// `proc_root` is "/proc" and `cgroup_root` "/sys/fs/cgroup" except in tests.
CacheRoom PageCacheRoom(const std::string& proc_root = "/proc",
                        const std::string& cgroup_root = "/sys/fs/cgroup");

}  // namespace rocksort

#endif  // ROCKSORT_COMMON_MEMORY_INFO_H_
