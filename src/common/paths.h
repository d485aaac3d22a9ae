// File: common/paths.h
// -----------------------------------------------------------------------------
// File-name helpers shared by the temporary DB (store/) and the output
// (output/), which both create names beside a user's path.
//
// Thread-safe (pathconf/stat only).
#ifndef ROCKSORT_COMMON_PATHS_H_
#define ROCKSORT_COMMON_PATHS_H_

#include <cstddef>
#include <string>

namespace rocksort {

// `path`, with its last component shortened (at a UTF-8 character boundary)
// just enough that `suffix_length` more bytes still make a name the
// directory's file system accepts (pathconf _PC_NAME_MAX, else 255). The
// temporary names made beside a path (OUT.partial.XXXXXX,
// OUT.rocksort.XXXXXX) would otherwise fail where OUT itself is fine. A
// last component already longer than the limit is returned as it is.
std::string FitFileName(const std::string& path, size_t suffix_length);

// Whether `path` exists and is a directory (following symlinks).
bool IsDirectory(const std::string& path);

}  // namespace rocksort

#endif  // ROCKSORT_COMMON_PATHS_H_
