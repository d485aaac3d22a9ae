#include "common/disk_info.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"

namespace rocksort {
namespace {

namespace fs = std::filesystem;

// Returns 1 (rotating), 0 (not) or -1 (unknown) for a block device directory
// in /sys/devices/..., following partitions and stacked devices.
int Rotational(const fs::path& device, std::string* name, int depth) {
  if (depth > 8) return -1;
  std::error_code ec;
  std::vector<fs::path> slaves;
  for (const auto& entry : fs::directory_iterator(device / "slaves", ec)) {
    slaves.push_back(fs::canonical(entry.path(), ec));
  }
  if (!slaves.empty()) {  // device-mapper, md: rotating if any part rotates.
    int result = 0;
    for (const fs::path& slave : slaves) {
      const int r = Rotational(slave, name, depth + 1);
      if (r == 1) return 1;
      if (r < 0) result = -1;
    }
    return result;
  }
  fs::path disk = device;
  if (fs::exists(device / "partition", ec)) disk = device.parent_path();
  std::ifstream in(disk / "queue" / "rotational");
  int value = -1;
  if (!(in >> value)) return -1;
  *name = disk.filename().string();
  return value == 1 ? 1 : 0;
}

// Reads one unsigned number from a sysfs file; 0 if unreadable.
uint64_t ReadNumber(const fs::path& file) {
  std::ifstream in(file);
  uint64_t value = 0;
  if (!(in >> value)) return 0;
  return value;
}

// Fills DiskDetection::request_bytes and max_read_bytes. `device` is a
// block device directory in /sys/devices/...; a partition has no queue/ of
// its own: its disk's applies. (A device-mapper or md device has its own,
// with the limits of its parts combined.)
void ReadRequestLimits(const fs::path& device, DiskDetection* result) {
  std::error_code ec;
  const fs::path queue =
      (fs::exists(device / "partition", ec) ? device.parent_path() : device) / "queue";
  const uint64_t max_kb = ReadNumber(queue / "max_sectors_kb");
  if (max_kb == 0) return;
  result->max_read_bytes = max_kb * 1024;
  uint64_t bytes = result->max_read_bytes;
  const uint64_t segments = ReadNumber(queue / "max_segments");
  const long page = ::sysconf(_SC_PAGESIZE);
  if (segments > 0 && page > 0) {
    uint64_t segment = static_cast<uint64_t>(page);
    const uint64_t max_segment = ReadNumber(queue / "max_segment_size");
    if (max_segment > 0) segment = std::min(segment, max_segment);
    bytes = std::min(bytes, segments * segment);
  }
  result->request_bytes = bytes;
}

}  // namespace

DiskDetection DetectDiskKind(const std::string& path, const std::string& sysfs_root) {
  DiskDetection result;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    result.reason = absl::StrCat("can't stat ", path, "; assuming ssd");
    return result;
  }
  if (major(st.st_dev) == 0) {
    result.reason = "no block device (tmpfs, overlay or network filesystem)";
    return result;
  }
  std::error_code ec;
  const fs::path link = fs::path(sysfs_root) / "dev" / "block" /
                        absl::StrCat(major(st.st_dev), ":", minor(st.st_dev));
  const fs::path device = fs::canonical(link, ec);
  if (ec) {
    result.reason = absl::StrCat(link.string(), " not found; assuming ssd");
    return result;
  }
  ReadRequestLimits(device, &result);
  std::string name = device.filename().string();
  const int rotational = Rotational(device, &name, 0);
  if (rotational < 0) {
    result.reason = absl::StrCat(name, ": rotational flag unreadable; assuming ssd");
  } else {
    result.kind = rotational == 1 ? DiskKind::kHdd : DiskKind::kSsd;
    result.reason = absl::StrCat(name, rotational == 1 ? ": rotational" : ": not rotational");
  }
  return result;
}

}  // namespace rocksort
