// File: common/disk_info.h
// -----------------------------------------------------------------------------
// Detects whether a directory sits on a rotating disk, from sysfs: the block
// device of the directory's filesystem (/sys/dev/block/MAJ:MIN), its parent
// disk when it is a partition, and for device-mapper and md devices every
// underlying device (slaves/). Rotating if any underlying device reports
// queue/rotational = 1. Also reads the largest read the device takes as one
// request, from the queue limits of the device itself (stacked devices carry
// the combined limits of their parts).
//
// Thread-safe (reads files only).
#ifndef ROCKSORT_COMMON_DISK_INFO_H_
#define ROCKSORT_COMMON_DISK_INFO_H_

#include <string>

#include <cstdint>

namespace rocksort {

enum class DiskKind {
  kSsd,  // Seeks are cheap: small readahead suffices.
  kHdd,  // Seeks cost ~10 ms: read each run in multi-MiB chunks.
};

struct DiskDetection {
  DiskKind kind = DiskKind::kSsd;
  // Why: e.g. "vda: rotational" or "no block device (tmpfs?)", for -v.
  std::string reason;
  // Largest buffered read the device is sure to serve as one request,
  // bytes; 0 if unknown. The page cache may hand the block layer one
  // segment per page (pages need not be physically contiguous), so this is
  // min(queue/max_sectors_kb, queue/max_segments x page size): 1016 KiB on
  // a virtio disk with 254 segments. A larger read may be split into
  // several requests, and a split-off tail of a few KiB costs a request of
  // its own.
  uint64_t request_bytes = 0;
  // queue/max_sectors_kb in bytes, 0 if unknown: the most the kernel reads
  // ahead for one posix_fadvise(WILLNEED) call (it truncates longer ones).
  uint64_t max_read_bytes = 0;
};

// Detects the disk kind for `path` (which must exist). Filesystems without a
// block device (tmpfs, overlay, NFS) count as SSD: seeks are not the cost
// there. `sysfs_root` is "/sys" except in tests.
DiskDetection DetectDiskKind(const std::string& path, const std::string& sysfs_root = "/sys");

}  // namespace rocksort

#endif  // ROCKSORT_COMMON_DISK_INFO_H_
