// File: pipeline/temp_db.h
// -----------------------------------------------------------------------------
// TempDb owns the whole life of the temporary RocksDB:
//   create a fresh directory (mkdtemp: never an existing one, so a directory
//   left by a crashed run is neither reused nor deleted) -> open the DB with
//   its lanes (column families, compaction_policy.h) -> close it ->
//   rocksdb::DestroyDB -> remove the directory.
// Every step after creation is undone on every path: Destroy() on success,
// the destructor on errors and early returns, the InterruptGuard's forced
// cleanup on signals.
//
// OutputFile writes the result under a temporary name beside the final one
// and renames it only in Commit(), after the caller has verified the write;
// if Commit() is never reached the partial file is removed, so a failed run
// never leaves a plausible output file. "-" writes to stdout.
//
// Both are move-free single owners; not thread-safe.
#ifndef ROCKSORT_PIPELINE_TEMP_DB_H_
#define ROCKSORT_PIPELINE_TEMP_DB_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/interrupt.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"

namespace rocksort::pipeline {

// `path`, with its last component shortened (at a UTF-8 character boundary)
// just enough that `suffix_length` more bytes still make a name the
// directory's file system accepts (pathconf _PC_NAME_MAX, else 255). The
// temporary names made beside a path (OUT.partial.XXXXXX,
// OUT.rocksort.XXXXXX) would otherwise fail where OUT itself is fine. A
// last component already longer than the limit is returned as it is.
std::string FitFileName(const std::string& path, size_t suffix_length);

class TempDb {
 public:
  // Creates the directory `<prefix>XXXXXX` (mkdtemp) and opens a new DB in it
  // with `lanes` (>= 1) column families, all with `options`: the default one
  // and "lane1", "lane2"... `registry` (may be null, not owned, must outlive
  // this) learns the directory for forced cleanup. Errors name the directory.
  // Without options.info_log the DB logs nothing (never a LOG file: see
  // rocksdb_log.h).
  static absl::StatusOr<std::unique_ptr<TempDb>> Create(const std::string& prefix,
                                                        const rocksdb::Options& options,
                                                        int lanes, CleanupRegistry* registry);
  ~TempDb();  // Destroy(), ignoring errors.

  TempDb(const TempDb&) = delete;
  TempDb& operator=(const TempDb&) = delete;

  rocksdb::DB* db() const { return db_.get(); }
  // The lanes' column families, the default one first. Owned by this TempDb.
  const std::vector<rocksdb::ColumnFamilyHandle*>& lanes() const { return lanes_; }
  const std::string& dir() const { return dir_; }
  const std::string& db_path() const { return db_path_; }

  // Closes and destroys the DB and removes the directory. Idempotent.
  absl::Status Destroy();

 private:
  TempDb(std::string dir, rocksdb::Options options, CleanupRegistry* registry)
      : dir_(std::move(dir)), db_path_(dir_ + "/db"), options_(std::move(options)),
        registry_(registry) {}

  const std::string dir_;
  const std::string db_path_;
  const rocksdb::Options options_;
  CleanupRegistry* const registry_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> lanes_;  // Owned; destroyed before db_.
  bool destroyed_ = false;
};

class OutputFile {
 public:
  // "-" means stdout. An existing path that is not a regular file (a device
  // such as /dev/null, a FIFO) is opened and written as it is, like stdout:
  // there is no file to replace atomically (and renaming over /dev/null
  // would replace the device). Otherwise creates `<path>.partial.XXXXXX`
  // beside `path` with the permissions a new file would get
  // (0666 & ~umask).
  static absl::StatusOr<std::unique_ptr<OutputFile>> Create(const std::string& path,
                                                            CleanupRegistry* registry);
  // Whether Create writes `path` in place: "-" or an existing path that is
  // neither a regular file nor a directory.
  static bool WritesInPlace(const std::string& path);
  // The file a new output replaces: `path`, or for a symlink the file it
  // resolves to (the link itself is kept).
  static std::string TargetPath(const std::string& path);
  ~OutputFile();  // Removes the partial file unless committed.

  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  int fd() const { return fd_; }
  // The user-facing name: the final path, or "stdout".
  const std::string& name() const { return name_; }
  // stdout or a device/FIFO: written in place, nothing to rename or remove.
  bool is_stream() const { return is_stream_; }

  // Makes what was written durable: fsync (also of stdout when it is a
  // regular file) and close, checking both. REQUIRES: everything was written
  // and verified. Errors name the file.
  absl::Status Finish();
  // The commit point: renames the partial file to its final name through
  // the registry's Publish (refused once a signal has come). Nothing that
  // can fail should follow it. A `companion` (the output's index) is renamed
  // in the same step, just before. REQUIRES: Finish() succeeded (on both).
  absl::Status Commit(OutputFile* companion = nullptr);
  // The file being written until Commit (empty for a stream).
  const std::string& partial_path() const { return partial_; }

 private:
  OutputFile(std::string name, std::string target, std::string partial, int fd, bool is_stream,
             CleanupRegistry* registry)
      : name_(std::move(name)), target_(std::move(target)), partial_(std::move(partial)),
        fd_(fd), is_stream_(is_stream), registry_(registry) {}

  const std::string name_;
  const std::string target_;   // What the partial file is renamed to.
  const std::string partial_;  // Empty for a stream.
  int fd_;                     // Owned unless it is STDOUT_FILENO; -1 after Finish.
  const bool is_stream_;
  CleanupRegistry* const registry_;
  bool committed_ = false;
};

}  // namespace rocksort::pipeline

#endif  // ROCKSORT_PIPELINE_TEMP_DB_H_
