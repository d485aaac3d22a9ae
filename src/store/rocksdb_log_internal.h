// File: store/rocksdb_log_internal.h  (internal to store/ and its tests)
// -----------------------------------------------------------------------------
// The temporary DB's info log. RocksDB's own logger writes a LOG file into
// the DB directory through a WritableFileWriter, and in 7.8.3 that writer
// asserts (abort, exit 134, temp data left behind) when it is written to
// again after a failed write: on a full temp filesystem the LOG's first
// failed flush was followed by the next message of a background flush
// (reproduced under ASan, stack in EnvLogger::Logv from
// DBImpl::BackgroundCallFlush). The LOG was deleted with the DB anyway, so
// nobody ever read it.
//
// CallbackLogger writes nothing to disk: each message at or above its level
// is formatted into one line (without a trailing newline) and handed to a
// callback (the CLI prints it on stderr with -v); the rest, and the options
// dump RocksDB writes as header lines on open, are dropped. Thread-safe as
// far as the callback is (RocksDB logs from every background thread).
#ifndef ROCKSORT_STORE_ROCKSDB_LOG_INTERNAL_H_
#define ROCKSORT_STORE_ROCKSDB_LOG_INTERNAL_H_

#include <cstdarg>
#include <functional>
#include <string>

#include "rocksdb/env.h"

namespace rocksort::store {

class CallbackLogger : public rocksdb::Logger {
 public:
  // Passes messages at `level` and above to `sink` (empty: drops them all);
  // NUM_INFO_LOG_LEVELS drops everything.
  CallbackLogger(rocksdb::InfoLogLevel level, std::function<void(const std::string&)> sink);

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override;
  void LogHeader(const char* format, va_list ap) override;

 private:
  const std::function<void(const std::string&)> sink_;
};

}  // namespace rocksort::store

#endif  // ROCKSORT_STORE_ROCKSDB_LOG_INTERNAL_H_
