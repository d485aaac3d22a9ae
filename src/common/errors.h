// File: common/errors.h
// -----------------------------------------------------------------------------
// One mapping from errno to absl::Status, used wherever a system call fails,
// so that the same failure gets the same code everywhere: a missing file or
// directory is NotFound, a full disk or quota and exhausted descriptors or
// memory are ResourceExhausted, permissions are PermissionDenied, an
// interrupted or broken stream is Unavailable, everything else Internal.
// (RocksDB's Status is converted in src/store/, htslib's int returns where
// each call is made: they mean different things per function.)
//
// Pure functions; thread-safe.
#ifndef ROCKSORT_COMMON_ERRORS_H_
#define ROCKSORT_COMMON_ERRORS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace rocksort {

// The status code for errno value `err` (see above).
absl::StatusCode ErrnoCode(int err);

// A status for a failed system call: `what` followed by ": " and
// strerror(err), with ErrnoCode(err). `what` names the file, e.g.
// "can't create \"out.bam\"".
absl::Status ErrnoStatus(int err, absl::string_view what);

}  // namespace rocksort

#endif  // ROCKSORT_COMMON_ERRORS_H_
