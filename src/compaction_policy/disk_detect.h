// File: compaction_policy/disk_detect.h
// -----------------------------------------------------------------------------
// Detects whether a directory sits on a rotating disk, from sysfs: the block
// device of the directory's filesystem (/sys/dev/block/MAJ:MIN), its parent
// disk when it is a partition, and for device-mapper and md devices every
// underlying device (slaves/). Rotating if any underlying device reports
// queue/rotational = 1.
//
// Thread-safe (reads files only).
#ifndef ROCKSORT_COMPACTION_POLICY_DISK_DETECT_H_
#define ROCKSORT_COMPACTION_POLICY_DISK_DETECT_H_

#include <string>

#include "compaction_policy/compaction_policy.h"

namespace rocksort::compaction_policy {

struct DiskDetection {
  DiskKind kind = DiskKind::kSsd;
  // Why: e.g. "vda: rotational" or "no block device (tmpfs?)", for -v.
  std::string reason;
};

// Detects the disk kind for `path` (which must exist). Filesystems without a
// block device (tmpfs, overlay, NFS) count as SSD: seeks are not the cost
// there. `sysfs_root` is "/sys" except in tests.
DiskDetection DetectDiskKind(const std::string& path, const std::string& sysfs_root = "/sys");

}  // namespace rocksort::compaction_policy

#endif  // ROCKSORT_COMPACTION_POLICY_DISK_DETECT_H_
