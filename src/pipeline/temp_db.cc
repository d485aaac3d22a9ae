#include "pipeline/temp_db.h"

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
#include "common/status_macros.h"
#include "common/interrupt.h"
#include "pipeline/rocksdb_log.h"
#include "rocksdb/convenience.h"

namespace rocksort::pipeline {
namespace {

std::string ErrnoText() { return std::strerror(errno); }

}  // namespace

std::string FitFileName(const std::string& path, size_t suffix_length) {
  const size_t slash = path.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const long limit = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  const size_t name_max = limit > 0 ? static_cast<size_t>(limit) : 255;
  const size_t length = path.size() - base;
  // A name too long in itself stays so: creating its temporary file fails
  // at once, naming it, rather than the rename after the whole sort.
  if (length + suffix_length <= name_max || length > name_max || suffix_length >= name_max) {
    return path;
  }
  size_t keep = name_max - suffix_length;
  // Not inside a UTF-8 sequence: back off over continuation bytes.
  while (keep > 0 && (static_cast<unsigned char>(path[base + keep]) & 0xC0) == 0x80) --keep;
  return path.substr(0, base + keep);
}

absl::StatusOr<std::unique_ptr<TempDb>> TempDb::Create(const std::string& prefix,
                                                       const rocksdb::Options& options,
                                                       int lanes, CleanupRegistry* registry) {
  std::string templ = prefix + "XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    const int err = errno;
    return absl::FailedPreconditionError(
        absl::StrFormat("can't create temporary directory \"%s\": %s", templ,
                        std::strerror(err)));
  }
  rocksdb::Options db_wide = options;
  // Never RocksDB's own LOG file in the directory (rocksdb_log.h).
  if (db_wide.info_log == nullptr) {
    db_wide.info_log = std::make_shared<StderrLogger>(rocksdb::InfoLogLevel::NUM_INFO_LOG_LEVELS);
  }
  std::unique_ptr<TempDb> temp(new TempDb(buf.data(), db_wide, registry));
  if (registry != nullptr) registry->Register(temp->dir_);
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  families.emplace_back(rocksdb::kDefaultColumnFamilyName, options);
  for (int i = 1; i < lanes; ++i) families.emplace_back(absl::StrCat("lane", i), options);
  // Created here rather than by RocksDB, which logs an error for the
  // missing directory before creating it.
  if (::mkdir(temp->db_path_.c_str(), 0700) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "can't create directory \"%s\": %s", temp->db_path_, ErrnoText()));
  }
  rocksdb::DBOptions db_options(db_wide);
  db_options.create_missing_column_families = true;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      rocksdb::DB::Open(db_options, temp->db_path_, families, &temp->lanes_, &db);
  if (!s.ok()) {
    return absl::InternalError(absl::StrFormat(
        "can't create the temporary database in \"%s\": %s", temp->dir_, s.ToString()));
  }
  temp->db_.reset(db);
  return temp;
}

TempDb::~TempDb() { (void)Destroy(); }

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
  // Anything left (a file from a failed flush, the db directory itself).
  RemovePathQuietly(dir_);
  if (::access(dir_.c_str(), F_OK) == 0 && result.ok()) {
    result = absl::InternalError(
        absl::StrFormat("can't remove temporary directory \"%s\"", dir_));
  }
  if (registry_ != nullptr) registry_->Unregister(dir_);
  return result;
}

absl::StatusOr<std::unique_ptr<OutputFile>> OutputFile::Create(const std::string& path,
                                                               CleanupRegistry* registry) {
  if (path == "-") {
    return std::unique_ptr<OutputFile>(
        new OutputFile("stdout", "", "", STDOUT_FILENO, true, registry));
  }
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("can't write \"%s\": is a directory", path));
  }
  if (WritesInPlace(path)) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      return absl::PermissionDeniedError(
          absl::StrFormat("can't open \"%s\" for writing: %s", path, ErrnoText()));
    }
    return std::unique_ptr<OutputFile>(new OutputFile(path, path, "", fd, true, registry));
  }
  const std::string target = TargetPath(path);
  constexpr absl::string_view kPartialSuffix = ".partial.XXXXXX";
  std::string templ = absl::StrCat(FitFileName(target, kPartialSuffix.size()), kPartialSuffix);
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  const int fd = mkstemp(buf.data());
  if (fd < 0) {
    // Named as the user wrote it: the partial file is an implementation
    // detail, and what fails (a missing directory, permissions, a full
    // disk) fails for OUT as well.
    return absl::PermissionDeniedError(absl::StrFormat(
        "can't create \"%s\" (a new file in its directory, renamed when complete): %s", path,
        ErrnoText()));
  }
  if (registry != nullptr) registry->Register(buf.data());
  // mkstemp creates 0600; give the file what open(O_CREAT, 0666) would.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  (void)::fchmod(fd, 0666 & ~mask);
  return std::unique_ptr<OutputFile>(
      new OutputFile(path, target, buf.data(), fd, false, registry));
}

std::string OutputFile::TargetPath(const std::string& path) {
  struct stat st;
  if (path == "-" || ::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
  // A symlink: write beside, and rename onto, the file it names, so the
  // link survives (and /dev/stdout redirected to a file becomes that file
  // rather than a file in /dev).
  std::unique_ptr<char, decltype(&std::free)> resolved(::realpath(path.c_str(), nullptr),
                                                       &std::free);
  return resolved != nullptr ? std::string(resolved.get()) : path;
}

bool OutputFile::WritesInPlace(const std::string& path) {
  if (path == "-") return true;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return false;  // A new file.
  if (S_ISDIR(st.st_mode)) return false;             // Create refuses it.
  if (!S_ISREG(st.st_mode)) return true;             // A device or a FIFO.
  // A regular file behind a link that names no path (/proc/self/fd/N of a
  // deleted file): there is nothing to rename onto.
  struct stat link;
  return ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode) && TargetPath(path) == path;
}

OutputFile::~OutputFile() {
  if (is_stream_) {
    if (fd_ >= 0 && fd_ != STDOUT_FILENO) ::close(fd_);
    return;
  }
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  ::unlink(partial_.c_str());
  if (registry_ != nullptr) registry_->Unregister(partial_);
}

absl::Status OutputFile::Finish() {
  // A stream is synced only when it is a regular file (stdout redirected to
  // one): errors that only show at writeback (a full quota, NFS) must not
  // pass silently. Pipes, terminals and /dev/null have nothing to flush.
  struct stat st;
  const bool sync = !is_stream_ || (::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode));
  if (sync && ::fsync(fd_) != 0) {
    return absl::UnavailableError(absl::StrFormat("%s: fsync failed: %s", name_, ErrnoText()));
  }
  if (fd_ == STDOUT_FILENO) return absl::OkStatus();
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    return absl::UnavailableError(absl::StrFormat("%s: close failed: %s", name_, ErrnoText()));
  }
  return absl::OkStatus();
}

absl::Status OutputFile::Commit(OutputFile* companion) {
  auto rename = [](const std::string& from, const std::string& to) -> absl::Status {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return absl::UnavailableError(
          absl::StrFormat("can't rename \"%s\" to \"%s\": %s", from, to, ErrnoText()));
    }
    return absl::OkStatus();
  };
  auto publish = [&]() -> absl::Status {
    if (companion != nullptr && !companion->is_stream_) {
      RETURN_IF_ERROR(rename(companion->partial_, companion->target_));
    }
    if (!is_stream_) {
      if (absl::Status s = rename(partial_, target_); !s.ok()) {
        if (companion != nullptr && !companion->is_stream_) ::unlink(companion->target_.c_str());
        return s;
      }
    }
    return absl::OkStatus();
  };
  absl::Status status =
      registry_ != nullptr ? registry_->Publish(partial_, publish) : publish();
  if (!status.ok()) return status;
  committed_ = true;
  if (companion != nullptr) {
    companion->committed_ = true;
    if (companion->registry_ != nullptr) companion->registry_->Unregister(companion->partial_);
  }
  return absl::OkStatus();
}

}  // namespace rocksort::pipeline
