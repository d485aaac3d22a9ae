// File: pipeline/rocksdb_log.h
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
// StderrLogger writes nothing to disk: messages at or above its level go to
// a file descriptor (stderr; -v sets WARN), one write(2) per line, prefixed
// "rocksort: rocksdb: "; the rest, and the options dump RocksDB writes as
// header lines on open, are dropped. Thread-safe (RocksDB logs from every
// background thread).
#ifndef ROCKSORT_PIPELINE_ROCKSDB_LOG_H_
#define ROCKSORT_PIPELINE_ROCKSDB_LOG_H_

#include <cstdarg>

#include "rocksdb/env.h"

namespace rocksort::pipeline {

class StderrLogger : public rocksdb::Logger {
 public:
  // Writes messages at `level` and above to `fd` (not owned); NUM_INFO_LOG_LEVELS
  // drops everything.
  explicit StderrLogger(rocksdb::InfoLogLevel level, int fd = 2);

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override;
  void LogHeader(const char* format, va_list ap) override;

 private:
  const int fd_;
};

}  // namespace rocksort::pipeline

#endif  // ROCKSORT_PIPELINE_ROCKSDB_LOG_H_
