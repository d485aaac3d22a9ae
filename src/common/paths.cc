#include "common/paths.h"

#include <sys/stat.h>
#include <unistd.h>

namespace rocksort {

std::string FitFileName(const std::string& path, size_t suffix_length) {
  const size_t slash = path.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const long limit = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  const size_t name_max = limit > 0 ? static_cast<size_t>(limit) : 255;
  const size_t length = path.size() - base;
  // A name too long in itself stays so: creating its temporary file fails
  // at once, naming it, rather than the rename after the whole sort.
  if (length + suffix_length <= name_max || length > name_max || suffix_length >= name_max) {
    return path;
  }
  size_t keep = name_max - suffix_length;
  // Not inside a UTF-8 sequence: back off over continuation bytes.
  while (keep > 0 && (static_cast<unsigned char>(path[base + keep]) & 0xC0) == 0x80) --keep;
  return path.substr(0, base + keep);
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace rocksort
