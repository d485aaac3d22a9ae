#include "store/temp_db_internal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/errors.h"
#include "common/interrupt.h"
#include "common/status_macros.h"
#include "rocksdb/convenience.h"
#include "store/rocksdb_log_internal.h"

namespace rocksort::store {
namespace {

// Whether a file in `dir` takes an O_DIRECT write of one 4 KiB page (the
// probe file is removed). tmpfs refuses O_DIRECT at open; some file systems
// only at the write.
bool TakesDirectWrites(const std::string& dir) {
  const std::string path = dir + "/direct-write-probe";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  constexpr size_t kPage = 4096;
  void* page = nullptr;
  bool ok = false;
  if (::posix_memalign(&page, kPage, kPage) == 0) {
    std::memset(page, 0, kPage);
    ok = ::pwrite(fd, page, kPage, 0) == static_cast<ssize_t>(kPage);
    std::free(page);
  }
  ::close(fd);
  ::unlink(path.c_str());
  return ok;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TempDb>> TempDb::Create(const std::string& prefix,
                                                       const rocksdb::Options& options, int lanes,
                                                       CleanupRegistry* registry) {
  std::string templ = prefix + "XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    return ErrnoStatus(errno, absl::StrFormat("can't create temporary directory \"%s\"", templ));
  }
  // At once: a forced exit during the probe below removes the directory too.
  if (registry != nullptr) registry->Register(buf.data());
  rocksdb::Options db_wide = options;
  // Never RocksDB's own LOG file in the directory (rocksdb_log.h).
  if (db_wide.info_log == nullptr) {
    db_wide.info_log =
        std::make_shared<CallbackLogger>(rocksdb::InfoLogLevel::NUM_INFO_LOG_LEVELS, nullptr);
  }
  // Probed in the new directory: the DB's own lies on the same file system.
  if (db_wide.use_direct_io_for_flush_and_compaction && !TakesDirectWrites(buf.data())) {
    db_wide.use_direct_io_for_flush_and_compaction = false;
  }
  std::unique_ptr<TempDb> temp(new TempDb(buf.data(), db_wide, registry));
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  families.emplace_back(rocksdb::kDefaultColumnFamilyName, options);
  for (int i = 1; i < lanes; ++i) families.emplace_back(absl::StrCat("lane", i), options);
  // Created here rather than by RocksDB, which logs an error for the
  // missing directory before creating it.
  if (::mkdir(temp->db_path_.c_str(), 0700) != 0) {
    return ErrnoStatus(errno, absl::StrFormat("can't create directory \"%s\"", temp->db_path_));
  }
  rocksdb::DBOptions db_options(db_wide);
  db_options.create_missing_column_families = true;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, temp->db_path_, families, &temp->lanes_, &db);
  if (!s.ok()) {
    return absl::InternalError(absl::StrFormat("can't create the temporary database in \"%s\": %s",
                                               temp->dir_, s.ToString()));
  }
  temp->db_.reset(db);
  return temp;
}

TempDb::~TempDb() { (void)Destroy(); }

absl::Status TempDb::SetRunCompression(rocksdb::CompressionType type) {
  std::string name;
  rocksdb::Status s = rocksdb::GetStringFromCompressionType(&name, type);
  for (size_t i = 0; s.ok() && i < lanes_.size(); ++i) {
    s = db_->SetOptions(lanes_[i], {{"compression", name}});
  }
  if (!s.ok()) {
    return absl::InternalError(
        absl::StrCat(dir_, ": can't change the runs' compression: ", s.ToString()));
  }
  return absl::OkStatus();
}

absl::Status TempDb::Destroy() {
  if (destroyed_) return absl::OkStatus();
  destroyed_ = true;
  absl::Status result;
  if (db_ != nullptr) {
    // Abort running compactions instead of waiting for them (error paths).
    rocksdb::CancelAllBackgroundWork(db_.get(), /*wait=*/true);
    for (rocksdb::ColumnFamilyHandle* lane : lanes_) db_->DestroyColumnFamilyHandle(lane);
    lanes_.clear();
    rocksdb::Status s = db_->Close();
    db_.reset();
    if (!s.ok() && !s.IsNotSupported()) {
      result = absl::InternalError(
          absl::StrFormat("closing the temporary database in \"%s\": %s", dir_, s.ToString()));
    }
  }
  // DestroyDB removes what RocksDB knows it created (SSTs, MANIFEST, LOG...).
  rocksdb::Status s = rocksdb::DestroyDB(db_path_, options_);
  if (!s.ok() && result.ok()) {
    result = absl::InternalError(
        absl::StrFormat("removing the temporary database \"%s\": %s", db_path_, s.ToString()));
  }
  if (await_deletes_) await_deletes_();
  // Anything left (a file from a failed flush, the db directory itself).
  RemovePathQuietly(dir_);
  if (::access(dir_.c_str(), F_OK) == 0 && result.ok()) {
    result = absl::InternalError(absl::StrFormat("can't remove temporary directory \"%s\"", dir_));
  }
  if (registry_ != nullptr) registry_->Unregister(dir_);
  return result;
}

}  // namespace rocksort::store
