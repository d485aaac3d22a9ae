#include "store/rocksdb_log_internal.h"

#include <cstdio>

namespace rocksort::store {

CallbackLogger::CallbackLogger(rocksdb::InfoLogLevel level,
                               std::function<void(const std::string&)> sink)
    : rocksdb::Logger(level), sink_(std::move(sink)) {}

void CallbackLogger::Logv(const char* format, va_list ap) {
  // RocksDB's base class calls this only for messages at or above the
  // level. Long messages are cut.
  if (!sink_) return;
  char line[1024];
  const int n = std::vsnprintf(line, sizeof(line), format, ap);
  if (n < 0) return;
  std::string text(line, std::min<size_t>(static_cast<size_t>(n), sizeof(line) - 1));
  while (!text.empty() && text.back() == '\n') text.pop_back();
  sink_(text);
}

void CallbackLogger::LogHeader(const char* /*format*/, va_list /*ap*/) {}

}  // namespace rocksort::store
