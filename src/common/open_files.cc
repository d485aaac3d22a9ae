#include "common/open_files.h"

#include <dirent.h>
#include <sys/resource.h>

#include <cstring>

namespace rocksort {

OpenFiles CountOpenFiles(const std::string& fd_dir, uint64_t limit) {
  OpenFiles files;
  if (limit != 0) {
    files.limit = limit;
  } else if (struct rlimit nofile;
             getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
    files.limit = static_cast<uint64_t>(nofile.rlim_cur);
  }
  DIR* dir = opendir(fd_dir.c_str());
  if (dir == nullptr) return files;
  // The listing of /proc/self/fd includes the descriptor reading it,
  // closed again below.
  const std::string own = std::to_string(dirfd(dir));
  while (const struct dirent* entry = readdir(dir)) {
    if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0 &&
        own != entry->d_name) {
      ++files.in_use;
    }
  }
  closedir(dir);
  return files;
}

}  // namespace rocksort
