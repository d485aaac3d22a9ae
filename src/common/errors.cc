#include "common/errors.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace rocksort {

absl::StatusCode ErrnoCode(int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::StatusCode::kNotFound;
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
      return absl::StatusCode::kResourceExhausted;
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::StatusCode::kPermissionDenied;
    case EEXIST:
      return absl::StatusCode::kAlreadyExists;
    case EISDIR:
    case ENAMETOOLONG:
    case EINVAL:
      return absl::StatusCode::kInvalidArgument;
    case EPIPE:
    case EIO:
    case EINTR:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status ErrnoStatus(int err, absl::string_view what) {
  return absl::Status(ErrnoCode(err), absl::StrCat(what, ": ", std::strerror(err)));
}

}  // namespace rocksort
