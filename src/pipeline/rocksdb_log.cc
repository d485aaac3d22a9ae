#include "pipeline/rocksdb_log.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace rocksort::pipeline {

namespace {
constexpr char kPrefix[] = "rocksort: rocksdb: ";
}  // namespace

StderrLogger::StderrLogger(rocksdb::InfoLogLevel level, int fd)
    : rocksdb::Logger(level), fd_(fd) {}

void StderrLogger::Logv(const char* format, va_list ap) {
  // RocksDB's base class calls this only for messages at or above the
  // level. Long messages are cut; one line is written in one call so that
  // lines of concurrent threads never interleave.
  char line[1024];
  constexpr size_t kPrefixSize = sizeof(kPrefix) - 1;
  std::memcpy(line, kPrefix, kPrefixSize);
  const size_t room = sizeof(line) - kPrefixSize - 1;  // Keeps a byte for '\n'.
  const int n = std::vsnprintf(line + kPrefixSize, room + 1, format, ap);
  if (n < 0) return;
  size_t size = kPrefixSize + std::min<size_t>(static_cast<size_t>(n), room);
  if (line[size - 1] != '\n') line[size++] = '\n';
  // Best effort: a log line that cannot be written is not worth an error.
  while (::write(fd_, line, size) < 0 && errno == EINTR) {
  }
}

void StderrLogger::LogHeader(const char* /*format*/, va_list /*ap*/) {}

}  // namespace rocksort::pipeline
