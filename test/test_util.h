// Shared helpers for the rocksort tests: scratch directories, running
// commands, and reading BAM files back with htslib for comparison.
#ifndef ROCKSORT_TEST_TEST_UTIL_H_
#define ROCKSORT_TEST_TEST_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rocksort::test_util {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents when
// the object dies.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  // Names of the entries in the directory, sorted.
  std::vector<std::string> List() const;

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;  // 128 + signal when killed by a signal.
  std::string stdout_text;
  std::string stderr_text;
};

// Runs `command` with /bin/sh -c, capturing stdout and stderr.
CommandResult RunCommand(const std::string& command);

// A shell prefix ("REF_PATH=... REF_CACHE=... ") that points htslib's
// reference lookup into a missing directory under `dir`, so that a command
// finds references only where the test says (never on the network).
std::string NoReferenceLookupEnv(const ScratchDir& dir);

// A BAM (or SAM) read back by htslib.
struct AlignmentFile {
  std::string header_without_pg;     // Header text with @PG lines removed.
  std::vector<std::string> records;  // Each decoded record: core fields + data.
  std::vector<std::string> names;    // Read names, for diagnostics.
};
absl::StatusOr<AlignmentFile> ReadAlignmentFile(const std::string& path);

// The decompressed bytes after the BAM header: the records exactly as stored.
absl::StatusOr<std::string> ReadBamRecordBytes(const std::string& path);

// Empty when `actual` has the same header (minus @PG) and the same records in
// the same order as `expected`; otherwise a description of the first
// difference.
std::string CompareAlignmentFiles(const std::string& expected, const std::string& actual);

std::string ReadFileOrDie(const std::string& path);
void WriteFileOrDie(const std::string& path, const std::string& contents);

// The test binaries' build locations (set by CMake).
// A FASTA whose sequences have the names and lengths of the @SQ lines in
// `header_text` (SAM header text), pseudo-random bases, 60 a line: the same
// bases for the same header, for CRAM tests.
std::string FastaForHeader(const std::string& header_text);

std::string RocksortBinary();
std::string GenReadsBinary();

}  // namespace rocksort::test_util

#endif  // ROCKSORT_TEST_TEST_UTIL_H_
