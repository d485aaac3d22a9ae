#include "common/memory_info.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace rocksort {
namespace {

namespace fs = std::filesystem;

// A limit at or above this is "no limit" (cgroup v1 writes the largest
// page-aligned signed 64-bit value).
constexpr uint64_t kNoLimit = uint64_t{1} << 60;

std::optional<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return text.str();
}

// The value of `key` in a "key value" per line file (memory.stat), or of
// "key: value kB" in /proc/meminfo (times `unit`).
std::optional<uint64_t> FindValue(absl::string_view text, absl::string_view key, uint64_t unit) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t:"), absl::SkipEmpty());
    uint64_t value = 0;
    if (fields.size() >= 2 && fields[0] == key && absl::SimpleAtoi(fields[1], &value)) {
      return value * unit;
    }
  }
  return std::nullopt;
}

// memory.limit_in_bytes or memory.max; nullopt when there is none.
std::optional<uint64_t> ReadLimit(const fs::path& file) {
  std::optional<std::string> text = ReadFile(file);
  if (!text.has_value()) return std::nullopt;
  uint64_t limit = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &limit) || limit >= kNoLimit) {
    return std::nullopt;  // "max", or the v1 "unlimited" value.
  }
  return limit;
}

uint64_t MiB(uint64_t bytes) { return bytes >> 20; }

struct Hierarchy {
  fs::path root;         // Where the hierarchy is mounted.
  std::string path;      // The process's cgroup in it, "/a/b".
  const char* limit_file;
  const char* anon_key;  // In memory.stat.
};

// The memory hierarchies /proc/self/cgroup names that are mounted under
// `cgroup_root`.
std::vector<Hierarchy> MemoryHierarchies(const std::string& proc_root,
                                         const std::string& cgroup_root) {
  std::vector<Hierarchy> result;
  std::optional<std::string> text = ReadFile(fs::path(proc_root) / "self" / "cgroup");
  if (!text.has_value()) return result;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    // "id:controllers:path"; the path may itself hold colons.
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    const std::string path(fields[2]);
    if (fields[0] == "0" && fields[1].empty()) {  // v2, alone or beside v1.
      for (const char* dir : {"", "unified"}) {
        const fs::path root = fs::path(cgroup_root) / dir;
        std::error_code ec;
        if (fs::exists(root / "cgroup.controllers", ec)) {
          result.push_back({root, path, "memory.max", "anon"});
          break;
        }
      }
      continue;
    }
    for (absl::string_view controller : absl::StrSplit(fields[1], ',')) {
      if (controller == "memory") {
        result.push_back({fs::path(cgroup_root) / "memory", path, "memory.limit_in_bytes",
                          "total_rss"});
      }
    }
  }
  return result;
}

}  // namespace

CacheRoom PageCacheRoom(const std::string& proc_root, const std::string& cgroup_root) {
  CacheRoom room;
  if (std::optional<std::string> meminfo = ReadFile(fs::path(proc_root) / "meminfo")) {
    if (std::optional<uint64_t> available = FindValue(*meminfo, "MemAvailable", 1024)) {
      room.bytes = *available;
      room.source = absl::StrCat("MemAvailable ", MiB(*available), " MiB");
    }
  }
  for (const Hierarchy& hierarchy : MemoryHierarchies(proc_root, cgroup_root)) {
    // The cgroup and each of its ancestors: the tightest limit holds.
    std::string path = hierarchy.path;
    for (;;) {
      const fs::path dir = hierarchy.root / fs::path(path).relative_path();
      if (std::optional<uint64_t> limit = ReadLimit(dir / hierarchy.limit_file)) {
        uint64_t anon = 0;
        if (std::optional<std::string> stat = ReadFile(dir / "memory.stat")) {
          anon = FindValue(*stat, hierarchy.anon_key, 1).value_or(0);
        }
        const uint64_t level = *limit > anon ? *limit - anon : 0;
        if (room.source.empty() || level < room.bytes) {
          room.bytes = level;
          room.source = absl::StrCat("cgroup ", path, ": limit ", MiB(*limit), " MiB, anon ",
                                     MiB(anon), " MiB");
        }
      }
      if (path.empty() || path == "/") break;
      const size_t slash = path.find_last_of('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  }
  return room;
}

}  // namespace rocksort
