// File: common/status_macros.h
// -----------------------------------------------------------------------------
// RETURN_IF_ERROR and ASSIGN_OR_RETURN for absl::Status / absl::StatusOr.
//
// The abseil packaged on Debian 12 (20220623) ships neither macro, so the
// project keeps this one tiny copy. Usage:
//
//   RETURN_IF_ERROR(writer.Write(bytes));
//   ASSIGN_OR_RETURN(auto plan, MakePlan(input));
//
// Thread-safe: these are plain control-flow macros.
#ifndef ROCKSORT_COMMON_STATUS_MACROS_H_
#define ROCKSORT_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ROCKSORT_CONCAT_INNER(a, b) a##b
#define ROCKSORT_CONCAT(a, b) ROCKSORT_CONCAT_INNER(a, b)

// Evaluates `expr` (an absl::Status) once and returns it from the enclosing
// function when it is not OK.
#define RETURN_IF_ERROR(expr)                            \
  do {                                                   \
    ::absl::Status rocksort_status_ = (expr);            \
    if (!rocksort_status_.ok()) return rocksort_status_; \
  } while (0)

// Evaluates `rexpr` (an absl::StatusOr<T>) once; on error returns its status,
// otherwise move-assigns the value to `lhs` (which may be a declaration).
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ROCKSORT_ASSIGN_OR_RETURN_IMPL(ROCKSORT_CONCAT(rocksort_statusor_, __LINE__), lhs, rexpr)

#define ROCKSORT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                   \
  if (!tmp.ok()) return tmp.status();                   \
  lhs = std::move(tmp).value()

#endif  // ROCKSORT_COMMON_STATUS_MACROS_H_
