#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/errors.h"
#include "common/paths.h"
#include "common/status_macros.h"
#include "output/output.h"

namespace rocksort::output {

absl::StatusOr<std::unique_ptr<OutputFile>> OutputFile::Create(const std::string& path,
                                                               CleanupRegistry* registry) {
  if (path == "-") {
    return std::unique_ptr<OutputFile>(
        new OutputFile("stdout", "", "", STDOUT_FILENO, true, registry));
  }
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrFormat("can't write \"%s\": is a directory", path));
  }
  if (WritesInPlace(path)) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      return ErrnoStatus(errno, absl::StrFormat("can't open \"%s\" for writing", path));
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
    return ErrnoStatus(
        errno,
        absl::StrFormat("can't create \"%s\" (a new file in its directory, renamed when complete)",
                        path));
  }
  if (registry != nullptr) registry->Register(buf.data());
  // mkstemp creates 0600; give the file what open(O_CREAT, 0666) would.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  (void)::fchmod(fd, 0666 & ~mask);
  return std::unique_ptr<OutputFile>(new OutputFile(path, target, buf.data(), fd, false, registry));
}

std::string OutputFile::TargetPath(const std::string& path) {
  struct stat st;
  if (path == "-" || ::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
  // A symlink: write beside, and rename onto, the file it names, so the
  // link survives (and /dev/stdout redirected to a file becomes that file
  // rather than a file in /dev).
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path resolved = fs::canonical(path, error);
  if (!error) return resolved.string();
  // A dangling link: writing through it, as samtools does, creates the file
  // it names, so that file is what the output replaces, in its directory.
  fs::path at = path;
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(at, error)); ++hops) {
    const fs::path next = fs::read_symlink(at, error);
    if (error) return path;
    at = next.is_absolute() ? next : at.parent_path() / next;
  }
  // A loop, or no permission to resolve it.
  if (fs::exists(fs::symlink_status(at, error))) return path;
  const fs::path directory =
      fs::canonical(at.has_parent_path() ? at.parent_path() : fs::path("."), error);
  if (error) return path;  // Creating OUT fails as opening it would.
  return (directory / at.filename()).string();
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
    return ErrnoStatus(errno, absl::StrCat(name_, ": fsync failed"));
  }
  if (fd_ == STDOUT_FILENO) return absl::OkStatus();
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    return ErrnoStatus(errno, absl::StrCat(name_, ": close failed"));
  }
  return absl::OkStatus();
}

absl::Status OutputFile::Commit(OutputFile* companion) {
  auto rename = [](const std::string& from, const std::string& to) -> absl::Status {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoStatus(errno, absl::StrFormat("can't rename \"%s\" to \"%s\"", from, to));
    }
    return absl::OkStatus();
  };
  // The data before its index: an interruption between the two leaves the
  // new data beside the old index, which htslib then reports as older than
  // the data, never a new index beside old data, which it would trust.
  auto publish = [&]() -> absl::Status {
    if (!is_stream_) RETURN_IF_ERROR(rename(partial_, target_));
    if (companion != nullptr && !companion->is_stream_) {
      if (absl::Status s = rename(companion->partial_, companion->target_); !s.ok()) {
        if (!is_stream_) ::unlink(target_.c_str());  // A failed run leaves no output.
        return s;
      }
    }
    return absl::OkStatus();
  };
  absl::Status status = registry_ != nullptr ? registry_->Publish(partial_, publish) : publish();
  if (!status.ok()) return status;
  committed_ = true;
  if (companion != nullptr) {
    companion->committed_ = true;
    if (companion->registry_ != nullptr) companion->registry_->Unregister(companion->partial_);
  }
  return absl::OkStatus();
}

}  // namespace rocksort::output
