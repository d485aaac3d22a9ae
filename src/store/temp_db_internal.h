// File: store/temp_db_internal.h  (internal to store/ and its tests)
// -----------------------------------------------------------------------------
// TempDb owns the whole life of the temporary RocksDB:
//   create a fresh directory (mkdtemp: never an existing one, so a directory
//   left by a crashed run is neither reused nor deleted) -> open the DB with
//   its lanes (column families, options_plan_internal.h) -> close it ->
//   rocksdb::DestroyDB -> remove the directory.
// Every step after creation is undone on every path: Destroy() on success,
// the destructor on errors and early returns, the InterruptGuard's forced
// cleanup on signals.
//
// A single owner; not thread-safe.
#ifndef ROCKSORT_STORE_TEMP_DB_INTERNAL_H_
#define ROCKSORT_STORE_TEMP_DB_INTERNAL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/interrupt.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"

namespace rocksort::store {

class TempDb {
 public:
  // Creates the directory `<prefix>XXXXXX` (mkdtemp) and opens a new DB in it
  // with `lanes` (>= 1) column families, all with `options`: the default one
  // and "lane1", "lane2"... `registry` (may be null, not owned, must outlive
  // this) learns the directory for forced cleanup. Errors name the directory.
  // Without options.info_log the DB logs nothing (never a LOG file: see
  // rocksdb_log_internal.h). options.use_direct_io_for_flush_and_compaction
  // is kept only where the directory's file system takes O_DIRECT writes
  // (tmpfs and some network file systems refuse them): direct_writes().
  static absl::StatusOr<std::unique_ptr<TempDb>> Create(const std::string& prefix,
                                                        const rocksdb::Options& options, int lanes,
                                                        CleanupRegistry* registry);
  ~TempDb();  // Destroy(), ignoring errors.

  TempDb(const TempDb&) = delete;
  TempDb& operator=(const TempDb&) = delete;

  rocksdb::DB* db() const { return db_.get(); }
  // The lanes' column families, the default one first. Owned by this TempDb.
  const std::vector<rocksdb::ColumnFamilyHandle*>& lanes() const { return lanes_; }
  const std::string& dir() const { return dir_; }
  const std::string& db_path() const { return db_path_; }
  // Whether runs are written with O_DIRECT (see Create).
  bool direct_writes() const { return options_.use_direct_io_for_flush_and_compaction; }

  // Runs flushed from now on, in every lane, are compressed with `type`
  // (flushes already running keep theirs). Errors name the directory.
  absl::Status SetRunCompression(rocksdb::CompressionType type);

  // Called by Destroy() after DestroyDB, before the directory is removed:
  // a file system that deletes in the background waits for its deletes.
  void set_await_deletes(std::function<void()> await_deletes) {
    await_deletes_ = std::move(await_deletes);
  }

  // Closes and destroys the DB and removes the directory. Idempotent.
  absl::Status Destroy();

 private:
  TempDb(std::string dir, rocksdb::Options options, CleanupRegistry* registry)
      : dir_(std::move(dir)),
        db_path_(dir_ + "/db"),
        options_(std::move(options)),
        registry_(registry) {}

  const std::string dir_;
  const std::string db_path_;
  const rocksdb::Options options_;
  CleanupRegistry* const registry_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> lanes_;  // Owned; destroyed before db_.
  std::function<void()> await_deletes_;
  bool destroyed_ = false;
};

}  // namespace rocksort::store

#endif  // ROCKSORT_STORE_TEMP_DB_INTERNAL_H_
