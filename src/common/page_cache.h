// File: common/page_cache.h
// -----------------------------------------------------------------------------
// Dropping a range of a file from the page cache. The kernel holds a file's
// pages in folios of up to kMaxFolioBytes (2 MiB, a PMD on x86-64), each
// aligned to its size, and POSIX_FADV_DONTNEED drops only the folios the
// range covers whole. A reader that dropped what it passed in ranges ending
// anywhere left the folio across each end in the cache for good: reading a
// file in 2 MiB chunks and dropping behind at page boundaries left 786 of
// 1,008 dropped MiB cached (Linux 6.18, ext4), which in a memory-limited
// cgroup is room the runs the merges read no longer have. Ranges whose ends
// are multiples of kMaxFolioBytes leave nothing.
//
// Thread-safe (constants only).
#ifndef ROCKSORT_COMMON_PAGE_CACHE_H_
#define ROCKSORT_COMMON_PAGE_CACHE_H_

#include <cstdint>

namespace rocksort {

inline constexpr uint64_t kMaxFolioBytes = uint64_t{2} << 20;

// `offset` rounded down to a folio boundary: a drop [FolioFloor(a),
// FolioFloor(b)) covers every folio it touches whole.
constexpr uint64_t FolioFloor(uint64_t offset) { return offset & ~(kMaxFolioBytes - 1); }

}  // namespace rocksort

#endif  // ROCKSORT_COMMON_PAGE_CACHE_H_
