// Reliability: the rocksort binary on input that is not SAM/BAM, corrupt or
// truncated BAM, bad records, malformed SAM, unusable paths, nonsense
// options, full disks, signals, a closed stdout and a stale temporary
// directory. Every failure must
//   * exit 1 (or 128 + signal when interrupted),
//   * print exactly one line on stderr, starting with "rocksort: " and naming
//     the input or output (and "record N", 1-based, for a bad record; for a
//     damaged BGZF block, the block's byte offset in the file will also do),
//   * leave no output: neither OUT nor OUT.partial.*,
//   * leave no temporary directory: no *.rocksort.* (or DIR/rocksort.*)
//     entry anywhere under the test's scratch directory, which also holds
//     every -T location, $TMPDIR and working directory used here.
// Inputs come from gen_reads; corruptions are made byte by byte below.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "htslib/bgzf.h"
#include "test_util.h"

namespace rocksort {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using test_util::CommandResult;
using test_util::RunCommand;
using test_util::ScratchDir;

// Every run of an external command is bounded; a hang fails the test (exit
// status 124 from timeout) instead of blocking the suite. The inputs are
// small: no successful run here takes more than a few seconds.
constexpr int kCommandTimeoutSeconds = 30;

// The 28-byte BGZF end-of-file block (SAM spec 4.1.2).
constexpr char kBgzfEof[] =
    "\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff\x06\x00\x42\x43\x02\x00"
    "\x1b\x00\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00";
constexpr size_t kBgzfEofSize = sizeof(kBgzfEof) - 1;

// Byte offsets of fields inside a BAM record, counted from its block_size.
constexpr size_t kBlockSizeField = 0;
constexpr size_t kRefIdField = 4;
constexpr size_t kLReadNameField = 12;  // uint8_t
constexpr size_t kLSeqField = 20;
constexpr size_t kNextRefIdField = 24;

std::string Rocksort(const std::string& args) {
  return absl::StrCat("timeout ", kCommandTimeoutSeconds, " ", test_util::RocksortBinary(), " ",
                      args);
}

uint32_t GetLe32(const std::string& bytes, size_t offset) {
  uint32_t v;
  std::memcpy(&v, bytes.data() + offset, 4);  // BAM is little-endian, as is the host.
  return v;
}

void PutLe32(uint32_t v, size_t offset, std::string* bytes) {
  std::memcpy(&(*bytes)[offset], &v, 4);
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// True when `line` contains `prefix` followed by the number `n` as a whole
// number (no digit right before or after it).
bool MentionsNumber(const std::string& line, const std::string& prefix, uint64_t n) {
  const std::string needle = absl::StrCat(prefix, n);
  auto is_digit = [&](size_t i) {
    return absl::ascii_isdigit(static_cast<unsigned char>(line[i]));
  };
  for (size_t at = line.find(needle); at != std::string::npos; at = line.find(needle, at + 1)) {
    const size_t end = at + needle.size();
    if ((end == line.size() || !is_digit(end)) &&
        (!prefix.empty() || at == 0 || !is_digit(at - 1))) {
      return true;
    }
  }
  return false;
}

// Names that rocksort gives its temporary directory and partial output, and
// the output name every test here uses.
bool IsRocksortLeftover(const std::string& name) {
  return name == "out.bam" || name == "out.bam.csi" || absl::StrContains(name, ".rocksort.") ||
         absl::StartsWith(name, "rocksort.") || absl::StrContains(name, ".partial.");
}

// Paths under `root` (recursively) that IsRocksortLeftover, except those in
// `allowed` (which are not descended into either).
std::vector<std::string> Leftovers(const std::string& root,
                                   const std::vector<std::string>& allowed = {}) {
  std::vector<std::string> found;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string path = it->path().string();
    if (std::find(allowed.begin(), allowed.end(), path) != allowed.end()) {
      it.disable_recursion_pending();
      continue;
    }
    if (IsRocksortLeftover(it->path().filename().string())) found.push_back(path);
  }
  return found;
}

// The size of the first "out.bam.partial.*" file in `dir`, or -1.
int64_t PartialOutputSize(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (absl::StartsWith(entry.path().filename().string(), "out.bam.partial.")) {
      const auto size = fs::file_size(entry.path(), ec);
      return ec ? -1 : static_cast<int64_t>(size);
    }
  }
  return -1;
}

// True once a sorted run (an .sst file) exists under `dir`.
bool HasSortedRun(const std::string& dir) {
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().extension() == ".sst") return true;
  }
  return false;
}

bool WaitFor(const std::function<bool()>& condition, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// --- BGZF and BAM at the byte level ------------------------------------------

struct BgzfBlock {
  size_t offset = 0;         // In the compressed file.
  size_t size = 0;           // Whole block, header to ISIZE.
  uint64_t data_offset = 0;  // Of its first byte in the decompressed stream.
  uint32_t data_size = 0;    // ISIZE.
};

// The BGZF blocks of `file`, in order; stops at the first non-BGZF byte.
std::vector<BgzfBlock> ParseBgzfBlocks(const std::string& file) {
  std::vector<BgzfBlock> blocks;
  size_t offset = 0;
  uint64_t data_offset = 0;
  while (offset + 18 <= file.size()) {
    const auto* p = reinterpret_cast<const unsigned char*>(file.data()) + offset;
    if (p[0] != 0x1f || p[1] != 0x8b || p[2] != 8 || (p[3] & 4) == 0) break;
    const size_t xlen = p[10] | p[11] << 8;
    size_t size = 0;
    for (size_t x = 12; x + 4 <= 12 + xlen && offset + x + 4 <= file.size();) {
      const size_t slen = p[x + 2] | p[x + 3] << 8;
      if (p[x] == 'B' && p[x + 1] == 'C' && slen == 2) size = (p[x + 4] | p[x + 5] << 8) + 1;
      x += 4 + slen;
    }
    if (size == 0 || offset + size > file.size()) break;
    BgzfBlock block;
    block.offset = offset;
    block.size = size;
    block.data_offset = data_offset;
    block.data_size = GetLe32(file, offset + size - 4);
    blocks.push_back(block);
    offset += size;
    data_offset += block.data_size;
  }
  return blocks;
}

// A BAM file decompressed: header, then records.
struct RawBam {
  std::string bytes;
  uint32_t n_ref = 0;
  std::vector<size_t> records;  // Offset of each record's block_size field.

  size_t RecordEnd(size_t i) const { return records[i] + 4 + GetLe32(bytes, records[i]); }

  // The 1-based number of the record a reader fails on when the stream is
  // unreadable from `offset` on: one more than the records that end before it.
  uint64_t RecordAt(uint64_t offset) const {
    uint64_t complete = 0;
    while (complete < records.size() && RecordEnd(complete) <= offset) ++complete;
    return complete + 1;
  }
};

absl::StatusOr<RawBam> ReadRawBam(const std::string& path) {
  BGZF* fp = bgzf_open(path.c_str(), "r");
  if (fp == nullptr) return absl::NotFoundError(absl::StrCat("can't open ", path));
  RawBam raw;
  char buf[1 << 16];
  ssize_t n;
  while ((n = bgzf_read(fp, buf, sizeof(buf))) > 0) raw.bytes.append(buf, static_cast<size_t>(n));
  bgzf_close(fp);
  if (n < 0) return absl::DataLossError(absl::StrCat(path, ": BGZF read error"));
  const std::string& b = raw.bytes;
  if (b.size() < 12 || b.compare(0, 4, "BAM\1") != 0) {
    return absl::DataLossError(absl::StrCat(path, ": not BAM"));
  }
  size_t at = 8 + GetLe32(b, 4);
  raw.n_ref = GetLe32(b, at);
  at += 4;
  for (uint32_t i = 0; i < raw.n_ref; ++i) at += 4 + GetLe32(b, at) + 4;
  while (at + 4 <= b.size()) {
    raw.records.push_back(at);
    at += 4 + GetLe32(b, at);
  }
  if (at != b.size()) return absl::DataLossError(absl::StrCat(path, ": ragged record stream"));
  return raw;
}

// Writes `bytes` as BGZF with uncompressed (level 0) blocks and an EOF block,
// as `samtools view -u` does; blocks split records wherever 64 KiB ends.
bool WriteBgzf(const std::string& path, const std::string& bytes) {
  BGZF* fp = bgzf_open(path.c_str(), "wu");
  if (fp == nullptr) return false;
  const bool wrote =
      bgzf_write(fp, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  return bgzf_close(fp) == 0 && wrote;
}

// --- Child processes -----------------------------------------------------------

// A command started with /bin/sh -c 'exec COMMAND', so that pid() is the
// command's own pid and signals reach it directly. Killed with SIGKILL if
// still running when destroyed.
class Child {
 public:
  // `stdin_fd` < 0 means /dev/null. stdout goes to /dev/null, stderr to
  // `stderr_path`.
  Child(const std::string& command, int stdin_fd, const std::string& stderr_path) {
    const std::string script = "exec " + command;
    pid_ = fork();
    if (pid_ == 0) {
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      signal(SIGPIPE, SIG_DFL);
      const int in = stdin_fd >= 0 ? stdin_fd : open("/dev/null", O_RDONLY);
      const int out = open("/dev/null", O_WRONLY);
      const int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (in < 0 || out < 0 || err < 0) _exit(127);
      dup2(in, STDIN_FILENO);
      dup2(out, STDOUT_FILENO);
      dup2(err, STDERR_FILENO);
      execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  bool running() {
    if (reaped_) return false;
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      status_ = status;
    }
    return !reaped_;
  }
  // The exit status (128 + signal if killed by one), or -1 if the child had
  // not exited within `timeout`, in which case it is killed.
  int Wait(milliseconds timeout) {
    if (!WaitFor([this] { return !running(); }, timeout)) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      reaped_ = true;
      return -1;
    }
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

class ReliabilityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The feeder threads below write into pipes whose reader may be gone.
    signal(SIGPIPE, SIG_IGN);
  }

  void TearDown() override {
    for (auto it = mounts_.rbegin(); it != mounts_.rend(); ++it) {
      if (umount2(it->c_str(), 0) != 0) umount2(it->c_str(), MNT_DETACH);
    }
  }

  std::string Generate(const std::string& name, const std::string& args) {
    const std::string path = dir_.File(name);
    const CommandResult r =
        RunCommand(absl::StrCat("timeout ", kCommandTimeoutSeconds, " ", test_util::GenReadsBinary(),
                                " ", args, " -o ", path));
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    return path;
  }

  std::string MakeDir(const std::string& name) {
    const std::string path = dir_.File(name);
    fs::create_directories(path);
    return path;
  }

  // Mounts a fresh tmpfs of `size` (mount's syntax, e.g. "2m") on
  // dir_/`name`; unmounted in TearDown. Empty if mounting is not permitted
  // (not root), with the reason in mount_error_.
  std::string MountTmpfs(const std::string& name, const std::string& size, bool read_only) {
    const std::string path = MakeDir(name);
    const std::string data = "size=" + size + ",mode=0755";
    if (mount("tmpfs", path.c_str(), "tmpfs", read_only ? MS_RDONLY : 0, data.c_str()) != 0) {
      mount_error_ = absl::StrCat("mount -t tmpfs ", path, ": ", std::strerror(errno));
      return "";
    }
    mounts_.push_back(path);
    return path;
  }

  // The error line of a failed run: the one line of stderr that starts with
  // "rocksort: ". Checks that it is the only line apart from warnings that
  // came before the failure (e.g. too little free space for -T).
  std::string ErrorLine(const CommandResult& r) {
    std::vector<std::string> lines;
    for (const std::string& line : Lines(r.stderr_text)) {
      if (!absl::StartsWith(line, "rocksort: warning: ")) lines.push_back(line);
    }
    EXPECT_EQ(lines.size(), 1u) << "stderr must be one line, got:\n" << r.stderr_text;
    for (const std::string& line : lines) {
      if (absl::StartsWith(line, "rocksort: ")) return line;
    }
    ADD_FAILURE() << "no line starting with \"rocksort: \" on stderr:\n" << r.stderr_text;
    return "";
  }

  void ExpectNoLeftovers(const std::vector<std::string>& allowed = {}) {
    const std::vector<std::string> left = Leftovers(dir_.path(), allowed);
    EXPECT_TRUE(left.empty()) << "left behind:\n" << absl::StrJoin(left, "\n");
  }

  // The contract for every failed run: `exit_code`, one error line naming
  // each of `mentions` and, when `record` is not 0, "record <record>" (or,
  // when `byte_offset` is not 0, that byte offset of the damaged BGZF block
  // instead), no output and no temporary data anywhere under dir_.
  void ExpectCleanFailure(const CommandResult& r, int exit_code,
                          const std::vector<std::string>& mentions, uint64_t record = 0,
                          uint64_t byte_offset = 0) {
    EXPECT_EQ(r.exit_code, exit_code) << "stderr:\n" << r.stderr_text;
    const std::string line = ErrorLine(r);
    for (const std::string& m : mentions) {
      EXPECT_TRUE(absl::StrContains(line, m)) << "\"" << m << "\" not in: " << line;
    }
    if (record != 0) {
      EXPECT_TRUE(MentionsNumber(line, "record ", record) ||
                  (byte_offset != 0 && MentionsNumber(line, "", byte_offset)))
          << "expected \"record " << record << "\""
          << (byte_offset != 0 ? absl::StrCat(" or byte offset ", byte_offset) : "")
          << " in: " << line;
    }
    ExpectNoLeftovers();
  }

  // Sorts `in` into dir_/out.bam with `options` and expects a clean failure
  // naming `in` and the 1-based `record` (or `byte_offset`, if not 0).
  void ExpectRecordFailure(const std::string& in, uint64_t record, const std::string& options = "",
                           uint64_t byte_offset = 0) {
    SCOPED_TRACE(absl::StrCat(in, " ", options));
    const CommandResult r =
        RunCommand(Rocksort(absl::StrCat(options, " -o ", dir_.File("out.bam"), " ", in)));
    ExpectCleanFailure(r, 1, {in}, record, byte_offset);
  }

  // Writes `raw` with record `n` (1-based) changed by `patch` as dir_/`name`.
  std::string WritePatched(const RawBam& raw, const std::string& name, uint64_t n,
                           const std::function<void(size_t record_offset, std::string*)>& patch) {
    std::string bytes = raw.bytes;
    patch(raw.records[n - 1], &bytes);
    const std::string path = dir_.File(name);
    EXPECT_TRUE(WriteBgzf(path, bytes)) << path;
    return path;
  }

  // Runs rocksort on a SAM stream fed through a pipe at a steady trickle
  // (64 KiB every 10 ms), sends `sig` once the first sorted run is on disk
  // (and again 50 ms later if `twice`), and returns its exit status and
  // stderr. (Measured: cancelling takes about 100 ms here, so the second
  // signal lands while the first is being handled.)
  CommandResult InterruptWhileLoading(const std::string& sam, int sig, bool twice) {
    // Split the SAM text into header and records.
    size_t header_end = 0;
    while (header_end < sam.size() && sam[header_end] == '@') {
      header_end = sam.find('\n', header_end) + 1;
    }
    const std::string header = sam.substr(0, header_end);
    const std::string records = sam.substr(header_end);

    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe2: " << std::strerror(errno);
      return {};
    }
    const std::string err = dir_.File("stderr.txt");
    Child child(absl::StrCat(test_util::RocksortBinary(), " -m 1M -o ", dir_.File("out.bam"), " -"),
                fds[0], err);
    close(fds[0]);
    std::atomic<bool> stop{false};
    std::thread feeder([&] {
      auto write_all = [&](const std::string& s) {
        for (size_t done = 0; done < s.size();) {
          const ssize_t w = write(fds[1], s.data() + done, s.size() - done);
          if (w <= 0) return false;
          done += static_cast<size_t>(w);
        }
        return true;
      };
      if (!write_all(header)) return;
      // The records again and again, in chunks that end at a line break.
      for (size_t at = 0; !stop.load();) {
        const size_t end = records.find('\n', std::min(records.size() - 1, at + (64 << 10)));
        if (!write_all(records.substr(at, end + 1 - at))) return;
        at = end + 1 == records.size() ? 0 : end + 1;
        std::this_thread::sleep_for(milliseconds(10));
      }
    });
    const bool loading = WaitFor([&] { return HasSortedRun(dir_.path()) || !child.running(); },
                                 milliseconds(20000)) &&
                         child.running();
    EXPECT_TRUE(loading) << "never caught rocksort while it was loading";
    CommandResult result;
    if (loading && child.running()) {
      kill(child.pid(), sig);
      if (twice) {
        std::this_thread::sleep_for(milliseconds(50));
        kill(child.pid(), sig);
      }
    }
    result.exit_code = child.Wait(milliseconds(loading ? 20000 : 0));
    stop.store(true);
    feeder.join();
    close(fds[1]);
    result.stderr_text = test_util::ReadFileOrDie(err);
    unlink(err.c_str());
    return result;
  }

  // Runs rocksort -l 9 on `in` with `options`, sends `sig` once the partial
  // output holds 256 KiB (so the emitter is writing; and again 50 ms later if
  // `twice`), and returns its exit status and stderr. (Measured: cancelling
  // at -l 9 takes 0.5-1 s, so the second signal lands during the first.)
  CommandResult InterruptWhileEmitting(const std::string& in, const std::string& options, int sig,
                                       bool twice) {
    const std::string err = dir_.File("stderr.txt");
    Child child(absl::StrCat(test_util::RocksortBinary(), " -l 9 ", options, " -o ",
                             dir_.File("out.bam"), " ", in),
                -1, err);
    const bool emitting =
        WaitFor([&] { return PartialOutputSize(dir_.path()) >= (256 << 10) || !child.running(); },
                milliseconds(30000));
    EXPECT_TRUE(emitting && child.running()) << "never caught rocksort while it was emitting";
    CommandResult result;
    if (emitting && child.running()) {
      kill(child.pid(), sig);
      if (twice) {
        std::this_thread::sleep_for(milliseconds(50));
        kill(child.pid(), sig);
      }
    }
    result.exit_code = child.Wait(milliseconds(emitting ? 20000 : 0));
    result.stderr_text = test_util::ReadFileOrDie(err);
    unlink(err.c_str());
    return result;
  }

  ScratchDir dir_;
  std::vector<std::string> mounts_;
  std::string mount_error_;
};

// --- 1. Not SAM/BAM at all ---------------------------------------------------

TEST_F(ReliabilityTest, RandomBytesAreRejectedAsNotAlignments) {
  std::string bytes;
  uint64_t x = 0x9e3779b97f4a7c15u;
  for (int i = 0; i < 100000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    bytes.push_back(static_cast<char>(x >> 24));
  }
  const std::string in = dir_.File("random.bin");
  test_util::WriteFileOrDie(in, bytes);
  ExpectCleanFailure(RunCommand(Rocksort("-o " + dir_.File("out.bam") + " " + in)), 1, {in});
}

TEST_F(ReliabilityTest, PlainTextIsRejectedAsNotAlignments) {
  const std::string in = dir_.File("notes.txt");
  test_util::WriteFileOrDie(in, "Shopping list\n\neggs, 12\nflour: 1 kg\n\tmilk\n");
  ExpectCleanFailure(RunCommand(Rocksort("-o " + dir_.File("out.bam") + " " + in)), 1, {in});
}

// htslib reads FASTQ and FASTA as unmapped records (and samtools sort
// accepts them), but they are not alignments: rocksort takes SAM, BAM and
// CRAM only.
TEST_F(ReliabilityTest, FastqAndFastaAreRejectedAsNotAlignments) {
  const std::string fastq = dir_.File("reads.fastq");
  test_util::WriteFileOrDie(fastq,
                          "@r1\nACGTACGTAC\n+\nIIIIIIIIII\n"
                          "@r2\nTTGCAAGGTC\n+\nIIIIIIIIII\n");
  const std::string fasta = dir_.File("reads.fa");
  test_util::WriteFileOrDie(fasta, ">r1\nACGTACGTAC\n>r2\nTTGCAAGGTC\n");
  for (const std::string& in : {fastq, fasta}) {
    SCOPED_TRACE(in);
    ExpectCleanFailure(RunCommand(Rocksort("-o " + dir_.File("out.bam") + " " + in)), 1, {in});
  }
}

TEST_F(ReliabilityTest, EmptyFileIsRejected) {
  const std::string in = dir_.File("empty.bam");
  test_util::WriteFileOrDie(in, "");
  ExpectCleanFailure(RunCommand(Rocksort("-o " + dir_.File("out.bam") + " " + in)), 1, {in});
}

TEST_F(ReliabilityTest, EmptyStdinIsRejected) {
  ExpectCleanFailure(RunCommand(Rocksort("-o " + dir_.File("out.bam") + " - < /dev/null")), 1,
                     {"stdin"});
}

// --- 2. Truncated and corrupt BGZF --------------------------------------------

class TruncatedBamTest : public ReliabilityTest {
 protected:
  // How the truncated BAM reaches rocksort.
  enum class Source { kFile, kStdin, kNamedPipe };

  struct Cut {
    std::string path;
    uint64_t record;        // The record the failure must name...
    uint64_t block_offset;  // ...or the offset of the cut block in the file.
  };

  // Generated BAMs cut inside a block, at several places. A cut inside a
  // block makes that whole block unreadable: the first record with bytes in
  // it is the one that fails.
  std::vector<Cut> MakeCuts() {
    const std::string in = Generate("in.bam", "-n 3000 --seed 31");
    const std::string file = test_util::ReadFileOrDie(in);
    const std::vector<BgzfBlock> blocks = ParseBgzfBlocks(file);
    absl::StatusOr<RawBam> raw = ReadRawBam(in);
    EXPECT_TRUE(raw.ok()) << raw.status();
    EXPECT_GE(blocks.size(), 6u);
    if (!raw.ok() || blocks.size() < 6) return {};
    EXPECT_EQ(blocks.back().data_size, 0u) << "expected an EOF block";
    // Block 0 holds the header; the last block is the EOF marker.
    const size_t last_data = blocks.size() - 2;
    const std::vector<size_t> offsets = {
        blocks[1].offset + blocks[1].size / 2,  // First record block.
        blocks[last_data / 2].offset + 10,      // Inside a block header.
        blocks[last_data / 2 + 1].offset + blocks[last_data / 2 + 1].size - 3,  // In ISIZE.
        blocks[last_data].offset + blocks[last_data].size / 3,                  // Last data block.
    };
    std::vector<Cut> cuts;
    for (size_t offset : offsets) {
      const auto block = std::find_if(blocks.begin(), blocks.end(), [&](const BgzfBlock& b) {
        return b.offset <= offset && offset < b.offset + b.size;
      });
      const std::string path = dir_.File(absl::StrCat("cut_at_", offset, ".bam"));
      test_util::WriteFileOrDie(path, file.substr(0, offset));
      cuts.push_back({path, raw->RecordAt(block->data_offset), block->offset});
    }
    return cuts;
  }

  void ExpectCutFails(const Cut& cut, const std::string& options, Source source) {
    SCOPED_TRACE(absl::StrCat(cut.path, " ", options, " source ", static_cast<int>(source)));
    const std::string out = dir_.File("out.bam");
    switch (source) {
      case Source::kFile:
        ExpectRecordFailure(cut.path, cut.record, options, cut.block_offset);
        break;
      case Source::kStdin:
        ExpectCleanFailure(
            RunCommand(Rocksort(absl::StrCat(options, " -o ", out, " - < ", cut.path))), 1,
            {"stdin"}, cut.record, cut.block_offset);
        break;
      case Source::kNamedPipe: {
        // A path that can be read once only: a failure must not hang on it.
        const std::string fifo = dir_.File("input.fifo");
        ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
        const CommandResult r = RunCommand(absl::StrCat("timeout 15 sh -c 'cat ", cut.path, " > ",
                                                        fifo, " & exec ", test_util::RocksortBinary(),
                                                        " ", options, " -o ", out, " ", fifo, "'"));
        unlink(fifo.c_str());
        ExpectCleanFailure(r, 1, {fifo}, cut.record, cut.block_offset);
        break;
      }
    }
  }
};

TEST_F(TruncatedBamTest, BamCutInsideABlockFailsAtTheFirstRecordOfThatBlock) {
  for (const Cut& cut : MakeCuts()) ExpectCutFails(cut, "", Source::kFile);
}

TEST_F(TruncatedBamTest, BamCutInsideABlockFailsAtTheFirstRecordOfThatBlockWithDecodeThreads) {
  for (const Cut& cut : MakeCuts()) ExpectCutFails(cut, "-@ 2", Source::kFile);
}

TEST_F(TruncatedBamTest, BamCutInsideABlockOnStdinFailsAtTheFirstRecordOfThatBlock) {
  for (const Cut& cut : MakeCuts()) {
    ExpectCutFails(cut, "", Source::kStdin);
    ExpectCutFails(cut, "-@ 2", Source::kStdin);
  }
}

TEST_F(TruncatedBamTest, BamCutInsideABlockInANamedPipeFailsPromptlyAtTheRightRecord) {
  const std::vector<Cut> cuts = MakeCuts();
  ASSERT_FALSE(cuts.empty());
  ExpectCutFails(cuts[1], "", Source::kNamedPipe);
  ExpectCutFails(cuts[1], "-@ 2", Source::kNamedPipe);
}

TEST_F(ReliabilityTest, BamCutInsideItsHeaderFailsNamingTheFile) {
  const std::string in = Generate("in.bam", "-n 500 --seed 32");
  const std::string file = test_util::ReadFileOrDie(in);
  const std::vector<BgzfBlock> blocks = ParseBgzfBlocks(file);
  ASSERT_FALSE(blocks.empty());
  const std::string cut = dir_.File("cut_header.bam");
  test_util::WriteFileOrDie(cut, file.substr(0, blocks[0].size / 2));
  ExpectCleanFailure(RunCommand(Rocksort("-o " + dir_.File("out.bam") + " " + cut)), 1, {cut});
}

// Records of more than 64 KiB (--edge-cases) span blocks, so cutting the file
// at a block boundary can end the data in the middle of a record with every
// remaining block intact. Cutting the decompressed stream mid-record and
// writing it with a proper EOF block must fail the same way.
TEST_F(ReliabilityTest, BamEndingInsideARecordFailsAtThatRecord) {
  const std::string in = Generate("in.bam", "-n 1000 --seed 33 --edge-cases");
  const std::string file = test_util::ReadFileOrDie(in);
  const std::vector<BgzfBlock> blocks = ParseBgzfBlocks(file);
  absl::StatusOr<RawBam> raw = ReadRawBam(in);
  ASSERT_TRUE(raw.ok()) << raw.status();

  std::vector<const BgzfBlock*> inside_a_record;
  for (const BgzfBlock& b : blocks) {
    const uint64_t n = raw->RecordAt(b.data_offset);
    if (b.data_offset > raw->records[0] && n <= raw->records.size() &&
        raw->records[n - 1] < b.data_offset) {
      inside_a_record.push_back(&b);
    }
  }
  ASSERT_FALSE(inside_a_record.empty()) << "no block boundary falls inside a record";
  const BgzfBlock& boundary = *inside_a_record[inside_a_record.size() / 2];
  const std::string at_boundary = dir_.File("cut_at_block_boundary.bam");
  test_util::WriteFileOrDie(at_boundary, file.substr(0, boundary.offset));
  ExpectRecordFailure(at_boundary, raw->RecordAt(boundary.data_offset), "", boundary.offset);

  const uint64_t n = raw->records.size() / 2;
  const size_t start = raw->records[n - 1];
  for (size_t into : {size_t{2}, size_t{20}, (raw->RecordEnd(n - 1) - start) / 2}) {
    const std::string path = dir_.File(absl::StrCat("record_cut_", into, ".bam"));
    ASSERT_TRUE(WriteBgzf(path, raw->bytes.substr(0, start + into)));
    ExpectRecordFailure(path, n);
  }
}

class CorruptBlockTest : public ReliabilityTest {
 protected:
  // Generates a BAM, applies `corrupt` to one middle block and expects the
  // failure at the first record with bytes in that block.
  void ExpectCorruptMiddleBlockFails(
      const std::function<void(const BgzfBlock&, std::string*)>& corrupt) {
    const std::string in = Generate("in.bam", "-n 3000 --seed 34");
    std::string file = test_util::ReadFileOrDie(in);
    const std::vector<BgzfBlock> blocks = ParseBgzfBlocks(file);
    absl::StatusOr<RawBam> raw = ReadRawBam(in);
    ASSERT_TRUE(raw.ok()) << raw.status();
    ASSERT_GE(blocks.size(), 6u);
    const BgzfBlock& block = blocks[blocks.size() / 2];
    corrupt(block, &file);
    const std::string bad = dir_.File("corrupt.bam");
    test_util::WriteFileOrDie(bad, file);
    ExpectRecordFailure(bad, raw->RecordAt(block.data_offset), "", block.offset);
    ExpectRecordFailure(bad, raw->RecordAt(block.data_offset), "-@ 2", block.offset);
  }
};

TEST_F(CorruptBlockTest, BlockWithBadCrcFailsAtItsFirstRecord) {
  ExpectCorruptMiddleBlockFails([](const BgzfBlock& b, std::string* file) {
    (*file)[b.offset + b.size - 8] ^= 0x5a;  // CRC32 is the trailer's first 4 bytes.
  });
}

TEST_F(CorruptBlockTest, BlockWithCorruptDeflateDataFailsAtItsFirstRecord) {
  ExpectCorruptMiddleBlockFails([](const BgzfBlock& b, std::string* file) {
    // The deflate payload lies between the 18-byte header and the 8-byte trailer.
    const size_t middle = b.offset + 18 + (b.size - 26) / 2;
    for (size_t i = 0; i < 8; ++i) (*file)[middle + i] ^= 0xa5;
  });
}

// Observed behaviour, asserted: a BAM without its EOF block is sorted
// completely and successfully (samtools does the same after a warning).
TEST_F(ReliabilityTest, BamWithoutEofBlockIsSortedCompletely) {
  const std::string in = Generate("in.bam", "-n 2000 --seed 35");
  const std::string file = test_util::ReadFileOrDie(in);
  ASSERT_EQ(file.substr(file.size() - kBgzfEofSize), std::string(kBgzfEof, kBgzfEofSize));
  const std::string no_eof = dir_.File("no_eof.bam");
  test_util::WriteFileOrDie(no_eof, file.substr(0, file.size() - kBgzfEofSize));
  const std::string expected = dir_.File("expected.bam");
  ASSERT_EQ(RunCommand("samtools sort -o " + expected + " " + in).exit_code, 0);
  const std::string out = dir_.File("out.bam");
  // From the file, with and without decode threads, and from a pipe, where
  // only reading to the end shows the marker missing: sorted, with a
  // warning naming the input.
  for (const std::string& args : {"-o " + out + " " + no_eof, "-@ 2 -o " + out + " " + no_eof,
                                  "-o " + out + " - < " + no_eof}) {
    SCOPED_TRACE(args);
    const CommandResult r = RunCommand(Rocksort(args));
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_EQ(test_util::CompareAlignmentFiles(expected, out), "");
    EXPECT_TRUE(absl::StrContains(r.stderr_text, "no end-of-file marker")) << r.stderr_text;
    EXPECT_TRUE(absl::StrContains(r.stderr_text, absl::StrContains(args, "- <") ? "stdin" : no_eof))
        << r.stderr_text;
    ExpectNoLeftovers({out});
  }
  // The complete file: no warning.
  const CommandResult whole = RunCommand(Rocksort("-o " + out + " - < " + in));
  ASSERT_EQ(whole.exit_code, 0) << whole.stderr_text;
  EXPECT_FALSE(absl::StrContains(whole.stderr_text, "end-of-file")) << whole.stderr_text;
}

// CRAM ends with an EOF container; without it the file may be truncated at
// a container boundary. As for BAM: sorted, with a warning.
TEST_F(ReliabilityTest, CramWithoutEofContainerIsSortedWithAWarning) {
  const std::string sam = Generate("in.sam", "-n 500 --seed 36");
  const std::string cram = dir_.File("in.cram");
  ASSERT_EQ(
      RunCommand("samtools view -C --output-fmt-option no_ref=1 -o " + cram + " " + sam).exit_code,
      0);
  const std::string file = test_util::ReadFileOrDie(cram);
  // CRAM 3's EOF container is the file's last 38 bytes.
  const std::string no_eof = dir_.File("no_eof.cram");
  test_util::WriteFileOrDie(no_eof, file.substr(0, file.size() - 38));
  const std::string expected = dir_.File("expected.bam");
  ASSERT_EQ(RunCommand("samtools sort -o " + expected + " " + cram).exit_code, 0);
  const std::string out = dir_.File("out.bam");
  for (const std::string& from : {no_eof, "- < " + no_eof}) {
    SCOPED_TRACE(from);
    const CommandResult r = RunCommand(Rocksort("-o " + out + " " + from));
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_EQ(test_util::CompareAlignmentFiles(expected, out), "");
    EXPECT_TRUE(absl::StrContains(r.stderr_text, "no end-of-file marker")) << r.stderr_text;
    EXPECT_TRUE(absl::StrContains(r.stderr_text, absl::StartsWith(from, "-") ? "stdin" : no_eof))
        << r.stderr_text;
  }
  for (const std::string& from : {cram, "- < " + cram}) {
    const CommandResult whole = RunCommand(Rocksort("-o " + out + " " + from));
    ASSERT_EQ(whole.exit_code, 0) << whole.stderr_text;
    EXPECT_FALSE(absl::StrContains(whole.stderr_text, "end-of-file")) << whole.stderr_text;
  }
}

// --- 3. Bad records -------------------------------------------------------------

class BadRecordTest : public ReliabilityTest {
 protected:
  void SetUp() override {
    const std::string in = Generate("in.bam", "-n 1500 --seed 36 --edge-cases");
    absl::StatusOr<RawBam> raw = ReadRawBam(in);
    ASSERT_TRUE(raw.ok()) << raw.status();
    raw_ = *std::move(raw);
    ASSERT_GT(raw_.records.size(), 2000u);
    n_ = raw_.records.size() / 2 + 17;  // Not in the first BGZF block.
  }

  // Writes the input with record n_ changed by `patch`, then expects a clean
  // failure naming record n_ (`record`, if given), with and without decode
  // threads.
  void ExpectPatchedRecordFails(const std::string& name,
                                const std::function<void(size_t, std::string*)>& patch,
                                uint64_t record = 0) {
    const std::string bad = WritePatched(raw_, name, record != 0 ? record : n_, patch);
    ExpectRecordFailure(bad, record != 0 ? record : n_);
    ExpectRecordFailure(bad, record != 0 ? record : n_, "-@ 2");
  }

  RawBam raw_;
  uint64_t n_ = 0;
};

TEST_F(BadRecordTest, ReferenceIdBeyondTheHeaderFailsAtThatRecord) {
  const uint32_t n_ref = raw_.n_ref;
  ExpectPatchedRecordFails("tid_n_ref.bam",
                           [&](size_t at, std::string* b) { PutLe32(n_ref, at + kRefIdField, b); });
  ExpectPatchedRecordFails("tid_minus_2.bam", [&](size_t at, std::string* b) {
    PutLe32(static_cast<uint32_t>(-2), at + kRefIdField, b);
  });
  ExpectPatchedRecordFails("mate_tid.bam", [&](size_t at, std::string* b) {
    PutLe32(n_ref + 3, at + kNextRefIdField, b);
  });
}

TEST_F(BadRecordTest, NegativeSequenceLengthFailsAtThatRecord) {
  ExpectPatchedRecordFails("negative_l_seq.bam", [](size_t at, std::string* b) {
    PutLe32(static_cast<uint32_t>(-5), at + kLSeqField, b);
  });
}

TEST_F(BadRecordTest, ZeroReadNameLengthFailsAtThatRecord) {
  ExpectPatchedRecordFails("l_read_name_0.bam",
                           [](size_t at, std::string* b) { (*b)[at + kLReadNameField] = 0; });
}

TEST_F(BadRecordTest, BlockSizeRunningPastTheDataFailsAtThatRecord) {
  ExpectPatchedRecordFails("huge_block_size.bam", [](size_t at, std::string* b) {
    PutLe32(0x7ffffff0u, at + kBlockSizeField, b);
  });
  const uint64_t last = raw_.records.size();
  ExpectPatchedRecordFails(
      "last_block_size.bam",
      [](size_t at, std::string* b) {
        PutLe32(static_cast<uint32_t>(b->size() - at - 4 + 1000), at + kBlockSizeField, b);
      },
      last);
}

// --- 4. Malformed SAM -------------------------------------------------------------

class MalformedSamTest : public ReliabilityTest {
 protected:
  // A 100,000-line SAM stream on stdin whose line 50,001 is broken: the
  // message must give that line's record number (the header lines do not
  // count).
  void ExpectMalformedLineFails(const std::string& options) {
    const std::string in = Generate("in.sam", "-n 50000 --seed 41 --read-length 50");
    std::vector<std::string> lines = absl::StrSplit(test_util::ReadFileOrDie(in), '\n');
    ASSERT_GE(lines.size(), 100000u);
    lines.resize(100000);
    uint64_t header_lines = 0;
    while (absl::StartsWith(lines[header_lines], "@")) ++header_lines;
    const uint64_t record = 50001 - header_lines;
    const std::string original = lines[50000];
    std::vector<std::string> fields = absl::StrSplit(original, '\t');
    ASSERT_GE(fields.size(), 11u);
    fields[3] = "12abc";  // POS is not a number.
    for (const std::string& broken :
         {std::string("this\tline\tis\tbroken"), absl::StrJoin(fields, "\t")}) {
      lines[50000] = broken;
      const std::string bad = dir_.File("bad.sam");
      test_util::WriteFileOrDie(bad, absl::StrJoin(lines, "\n") + "\n");
      SCOPED_TRACE(broken.substr(0, 40));
      const CommandResult r =
          RunCommand(Rocksort(absl::StrCat(options, " -o ", dir_.File("out.bam"), " - < ", bad)));
      ExpectCleanFailure(r, 1, {"stdin"}, record);
    }
  }
};

TEST_F(MalformedSamTest, MalformedLineOnStdinFailsAtItsRecordNumber) {
  ExpectMalformedLineFails("");
}

TEST_F(MalformedSamTest, MalformedLineOnStdinFailsAtItsRecordNumberWithDecodeThreads) {
  ExpectMalformedLineFails("-@ 2");
}

// --- 5. Unusable paths and nonsense options ------------------------------------------

// As root, chmod 000 does not make a file unreadable; a directory (or a path
// under a missing directory) is an input that cannot be read even by root.
TEST_F(ReliabilityTest, DirectoryAsInputIsRejected) {
  const std::string in = MakeDir("a_directory");
  ExpectCleanFailure(RunCommand(Rocksort("-o " + dir_.File("out.bam") + " " + in)), 1, {in});
}

TEST_F(ReliabilityTest, InputUnderMissingDirectoryIsRejected) {
  const std::string in = dir_.File("missing/in.bam");
  ExpectCleanFailure(RunCommand(Rocksort("-o " + dir_.File("out.bam") + " " + in)), 1, {in});
}

TEST_F(ReliabilityTest, OutputUnderMissingDirectoryFailsBeforeSorting) {
  const std::string in = Generate("in.bam", "-n 500 --seed 51");
  const std::string out = dir_.File("missing/out.bam");
  // Quoted: the message names OUT, not the partial file written before the
  // rename (OUT.partial.XXXXXX).
  ExpectCleanFailure(RunCommand(Rocksort("-o " + out + " " + in)), 1, {"\"" + out + "\""});
}

// A name longer than the file system takes fails at once, naming it (not
// its partial file, and not after the sort, at the rename); so does an
// index name that only the ".csi" pushes over the limit.
TEST_F(ReliabilityTest, OutputNameTooLongFailsBeforeSorting) {
  if (::pathconf(dir_.path().c_str(), _PC_NAME_MAX) != 255) GTEST_SKIP() << "NAME_MAX is not 255";
  const std::string in = Generate("in.bam", "-n 500 --seed 57");
  const std::string out = dir_.File(std::string(300, 'b') + ".bam");
  ExpectCleanFailure(RunCommand(Rocksort("-o " + out + " " + in)), 1,
                     {"\"" + out + "\"", "File name too long"});
  const std::string indexed = dir_.File(std::string(249, 'c') + ".bam");  // 253 bytes.
  ExpectCleanFailure(RunCommand(Rocksort("--write-index -o " + indexed + " " + in)), 1,
                     {"\"" + indexed + ".csi\"", "File name too long"});
}

// A FIFO given as both input and output is refused at once; opening it to
// read would wait for a writer forever.
TEST_F(ReliabilityTest, FifoAsInputAndOutputIsRefused) {
  const std::string fifo = dir_.File("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const CommandResult r = RunCommand(Rocksort("-o " + fifo + " " + fifo));
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "is an input")) << r.stderr_text;
}

// `-o IN IN` that fails (here a truncated input) leaves IN as it was.
TEST_F(ReliabilityTest, FailedSortOntoItsInputLeavesTheInputUnchanged) {
  const std::string whole = test_util::ReadFileOrDie(Generate("whole.bam", "-n 2000 --seed 58"));
  const std::string in = dir_.File("in.bam");
  const std::string cut = whole.substr(0, whole.size() / 2);
  test_util::WriteFileOrDie(in, cut);
  const CommandResult r = RunCommand(Rocksort("-o " + in + " " + in));
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  EXPECT_TRUE(test_util::ReadFileOrDie(in) == cut) << "the input changed";
  ExpectNoLeftovers();
}

TEST_F(ReliabilityTest, OutputOnReadOnlyFilesystemFails) {
  const std::string ro = MountTmpfs("ro", "1m", /*read_only=*/true);
  if (ro.empty()) GTEST_SKIP() << "needs root to mount a read-only tmpfs: " << mount_error_;
  const std::string in = Generate("in.bam", "-n 500 --seed 52");
  const std::string out = ro + "/out.bam";
  ExpectCleanFailure(RunCommand(Rocksort("-o " + out + " " + in)), 1, {"\"" + out + "\""});
}

TEST_F(ReliabilityTest, TempPrefixOnReadOnlyFilesystemFailsAndRemovesThePartialOutput) {
  const std::string ro = MountTmpfs("ro", "1m", /*read_only=*/true);
  if (ro.empty()) GTEST_SKIP() << "needs root to mount a read-only tmpfs: " << mount_error_;
  const std::string in = Generate("in.bam", "-n 500 --seed 53");
  ExpectCleanFailure(RunCommand(Rocksort("-T " + ro + " -o " + dir_.File("out.bam") + " " + in)), 1,
                     {ro});
}

TEST_F(ReliabilityTest, TempPrefixUnderMissingDirectoryFailsAndRemovesThePartialOutput) {
  const std::string in = Generate("in.bam", "-n 500 --seed 54");
  const std::string prefix = dir_.File("missing/tmp");
  ExpectCleanFailure(
      RunCommand(Rocksort("-T " + prefix + " -o " + dir_.File("out.bam") + " " + in)), 1, {prefix});
}

TEST_F(ReliabilityTest, ReferenceTooLongForBamFailsBeforeSorting) {
  // SAM text may declare a reference longer than BAM's 2^31 - 1; the output
  // header could not hold it, so the run fails before loading anything.
  const std::string in = dir_.File("long_ref.sam");
  test_util::WriteFileOrDie(in,
                          "@SQ\tSN:huge\tLN:3000000000\n"
                          "r1\t0\thuge\t100\t60\t4M\t*\t0\t0\tACGT\tIIII\n");
  ExpectCleanFailure(RunCommand(Rocksort("-o " + dir_.File("out.bam") + " " + in)), 1,
                     {in, "huge", "BAM holds at most"});
}

// A header htslib cannot parse (samtools sort fails on it too) fails before
// loading, naming the input and the header.
TEST_F(ReliabilityTest, UnparsableHeaderFailsNamingTheInput) {
  const std::string dup = dir_.File("duplicate_sq.sam");
  test_util::WriteFileOrDie(dup,
                          "@SQ\tSN:c\tLN:100\n@SQ\tSN:c\tLN:100\n"
                          "r1\t0\tc\t1\t0\t1M\t*\t0\t0\tA\tI\n");
  ExpectCleanFailure(RunCommand(Rocksort("-o " + dir_.File("out.bam") + " " + dup)), 1,
                     {dup, "header"});
  const std::string hd = dir_.File("malformed_hd.sam");
  test_util::WriteFileOrDie(hd,
                          "@HD\tVN:1.6\t\n@SQ\tSN:c\tLN:100\n"
                          "r1\t0\tc\t1\t0\t1M\t*\t0\t0\tA\tI\n");
  ExpectCleanFailure(RunCommand(Rocksort("-o " + dir_.File("out.bam") + " " + hd)), 1,
                     {hd, "header"});
}

// A file size limit (ulimit -f) would kill the process with SIGXFSZ and
// leave its temporary data behind; ignored, the signal turns into a write
// error (EFBIG) that fails the run cleanly, whichever thread wrote: the
// output (-m 1M), a flush (-u), a merge down on the main thread
// (--no-compaction), RocksDB's OPTIONS file while opening the DB (4 blocks).
TEST_F(ReliabilityTest, FileSizeLimitFailsCleanlyInsteadOfKilling) {
  const std::string in = Generate("in.bam", "-n 20000 --seed 59");
  const std::pair<int, std::string> cases[] = {
      {1024, "-m 1M"}, {1024, "-u"}, {2048, "--no-compaction -m 1M"}, {4, "-m 1M"}};
  for (const auto& [blocks, args] : cases) {
    SCOPED_TRACE(absl::StrCat("ulimit -f ", blocks, " ", args));
    const CommandResult r = RunCommand(absl::StrCat(
        "ulimit -f ", blocks, " && ", Rocksort(args + " -o " + dir_.File("out.bam") + " " + in)));
    ExpectCleanFailure(r, 1, {"File too large"});
  }
}

// A failed run with --write-index leaves neither the output nor its index
// (nor their partial files).
TEST_F(ReliabilityTest, FailedRunWithWriteIndexLeavesNoIndex) {
  const std::string in = dir_.File("bad.sam");
  test_util::WriteFileOrDie(in,
                          "@SQ\tSN:c\tLN:100\nr1\t0\tc\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n"
                          "r2\t0\tc\tnot-a-number\t60\t4M\t*\t0\t0\tACGT\tIIII\n");
  ExpectCleanFailure(RunCommand(Rocksort("--write-index -o " + dir_.File("out.bam") + " " + in)), 1,
                     {in});
}

// BAI holds positions below 2^29 (samtools sort fails the same way): the
// run fails naming the index, the reference by name and the position, and
// leaves neither output; the default CSI indexes the same input.
TEST_F(ReliabilityTest, PositionBeyondBaiFailsNamingTheReferenceAndPosition) {
  const std::string in = dir_.File("long_chrom.sam");
  test_util::WriteFileOrDie(in,
                          "@SQ\tSN:chr1\tLN:1000\n@SQ\tSN:bigchrom\tLN:600000000\n"
                          "r1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n"
                          "r2\t0\tbigchrom\t550000000\t60\t4M\t*\t0\t0\tACGT\tIIII\n");
  const std::string out = dir_.File("out.bam");
  const std::string bai = dir_.File("out.bai");
  ExpectCleanFailure(RunCommand(Rocksort("--write-index -o " + out + "##idx##" + bai + " " + in)),
                     1, {bai, "bigchrom:550000000-550000003", "CSI"});
  EXPECT_NE(::access(bai.c_str(), F_OK), 0) << "index left behind";

  const CommandResult csi = RunCommand(Rocksort("--write-index -o " + out + " " + in));
  EXPECT_EQ(csi.exit_code, 0) << csi.stderr_text;
  EXPECT_EQ(RunCommand("samtools view -c " + out + " bigchrom:549999990-550000010").stdout_text,
            "1\n");
}

// Misuse prints the error line, then the usage (as samtools does).
TEST_F(ReliabilityTest, NonsenseOptionsAreRejectedWithUsage) {
  const std::string in = Generate("in.bam", "-n 100 --seed 55");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"-m", "0"}, {"-m", "12Q"}, {"-@", "-3"}, {"-l", "11"}};
  for (const auto& [flag, value] : cases) {
    SCOPED_TRACE(flag + " " + value);
    const CommandResult r =
        RunCommand(Rocksort(absl::StrCat(flag, " ", value, " -o ", dir_.File("out.bam"), " ", in)));
    EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
    const std::vector<std::string> lines = Lines(r.stderr_text);
    ASSERT_FALSE(lines.empty());
    EXPECT_TRUE(absl::StartsWith(lines[0], "rocksort: ")) << lines[0];
    EXPECT_TRUE(absl::StrContains(lines[0], flag)) << lines[0];
    EXPECT_TRUE(absl::StrContains(lines[0], value)) << lines[0];
    EXPECT_TRUE(absl::StrContains(r.stderr_text, "Usage:")) << r.stderr_text;
    EXPECT_EQ(r.stdout_text, "");
    ExpectNoLeftovers();
  }
}

// --- 6. Disk full -----------------------------------------------------------------

// About 20 MiB of records into a 2 MiB -T filesystem: the temporary DB runs
// out of space while loading (-m 1M flushes every 256 KiB) or when the last
// memtable is flushed (default -m).
TEST_F(ReliabilityTest, FullTempFilesystemFailsCleanly) {
  const std::string tmp = MountTmpfs("small_tmp", "2m", /*read_only=*/false);
  if (tmp.empty()) GTEST_SKIP() << "needs root to mount a tmpfs: " << mount_error_;
  const std::string in = Generate("in.bam", "-n 30000 --seed 61");
  for (const std::string memory : {"-m 1M", "-@ 2 -m 4M"}) {
    SCOPED_TRACE(memory);
    const CommandResult r = RunCommand(
        Rocksort(absl::StrCat(memory, " -T ", tmp, " -o ", dir_.File("out.bam"), " ", in)));
    ExpectCleanFailure(r, 1, {tmp});
    EXPECT_TRUE(fs::is_empty(tmp)) << "the tmpfs is not empty";
  }
  // At the default -m the 19 MB of records stay in one memtable, which the
  // final merge reads from memory: nothing is written there, as samtools
  // writes no temporary file for data that fits in its memory.
  const CommandResult r =
      RunCommand(Rocksort(absl::StrCat("-T ", tmp, " -o ", dir_.File("out.bam"), " ", in)));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_FALSE(absl::StrContains(r.stderr_text, "may need up to")) << r.stderr_text;
  EXPECT_TRUE(fs::is_empty(tmp)) << "the tmpfs is not empty";
  const std::string expected = dir_.File("expected.bam");
  ASSERT_EQ(RunCommand("samtools sort -o " + expected + " " + in).exit_code, 0);
  EXPECT_EQ(test_util::CompareAlignmentFiles(expected, dir_.File("out.bam")), "");
}

// The free-space warning before loading: -s 48M needs up to 36 MiB of
// scratch with LZ4 runs (3/4 of the size) and 24 MiB with zstd runs (1/2);
// the filesystem has 32 MiB, less what the open DB has taken (RocksDB
// preallocates its log in proportion to the memtables, hence -m 4M), and the
// data itself (about 1 MB) fits either way.
TEST_F(ReliabilityTest, ShortScratchSpaceWarningCountsTheRunCompression) {
  const std::string tmp = MountTmpfs("warn_tmp", "32m", /*read_only=*/false);
  if (tmp.empty()) GTEST_SKIP() << "needs root to mount a tmpfs: " << mount_error_;
  const std::string in = Generate("in.bam", "-n 2000 --seed 63");
  for (const auto& [compression, warns] :
       {std::pair<std::string, bool>{"lz4", true}, std::pair<std::string, bool>{"zstd", false}}) {
    SCOPED_TRACE(compression);
    const CommandResult r =
        RunCommand(Rocksort(absl::StrCat("-m 4M -s 48M --run-compression ", compression, " -T ",
                                         tmp, " -o ", dir_.File("out.bam"), " ", in)));
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_EQ(absl::StrContains(r.stderr_text, "may need up to"), warns) << r.stderr_text;
    EXPECT_TRUE(fs::is_empty(tmp)) << "the tmpfs is not empty";
  }
}

// Room for the flushed runs (28.2 MB for this input) but not for merging
// them: a size hint far below the data (so no merging while loading), -m 1M
// (runs of about 250 KB; 96 to 123 measured, as flushes fall with the
// timing) and the hdd profile, whose final merge reads at most 32 runs, so
// after loading rocksort merges at least 64 runs, 30 or more at a time. A
// merge's output exists before its inputs are deleted: 30 runs need about
// 7 MB beyond the runs, and the filesystem leaves about 4 MB. (With
// -m 2M, 46 to 60 runs, two merges of a few runs each fitted now and then.)
TEST_F(ReliabilityTest, FullTempFilesystemWhileMergingFailsCleanly) {
  const std::string tmp = MountTmpfs("merge_tmp", "31m", /*read_only=*/false);
  if (tmp.empty()) GTEST_SKIP() << "needs root to mount a tmpfs: " << mount_error_;
  const std::string in = Generate("in.bam", "-n 80000 --seed 13");
  const CommandResult r = RunCommand(Rocksort(
      absl::StrCat("-m 1M -s 1K --disk hdd -T ", tmp, " -o ", dir_.File("out.bam"), " ", in)));
  ExpectCleanFailure(r, 1, {tmp});
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "merging sorted runs failed")) << r.stderr_text;
  EXPECT_TRUE(fs::is_empty(tmp)) << "the tmpfs is not empty";
}

// The output (about 3 MiB) on a 1 MiB filesystem, the DB elsewhere: writing
// fails while emitting.
TEST_F(ReliabilityTest, FullOutputFilesystemFailsCleanly) {
  const std::string small = MountTmpfs("small_out", "1m", /*read_only=*/false);
  if (small.empty()) GTEST_SKIP() << "needs root to mount a tmpfs: " << mount_error_;
  const std::string in = Generate("in.bam", "-n 15000 --seed 62");
  const std::string tmp = MakeDir("tmp");
  const std::string out = small + "/out.bam";
  for (const std::string threads : {"", "-@ 2"}) {
    SCOPED_TRACE(threads);
    const CommandResult r =
        RunCommand(Rocksort(absl::StrCat(threads, " -T ", tmp, " -o ", out, " ", in)));
    ExpectCleanFailure(r, 1, {out});
    EXPECT_TRUE(fs::is_empty(small)) << "the tmpfs is not empty";
  }
}

// --- 7. Signals ---------------------------------------------------------------------

TEST_F(ReliabilityTest, SignalWhileLoadingExitsWithSignalStatusAndLeavesNothing) {
  const std::string in = Generate("in.sam", "-n 3000 --seed 71");
  const std::string sam = test_util::ReadFileOrDie(in);
  for (int sig : {SIGINT, SIGTERM}) {
    for (bool twice : {false, true}) {
      SCOPED_TRACE(absl::StrCat("signal ", sig, twice ? " twice" : " once"));
      ExpectCleanFailure(InterruptWhileLoading(sam, sig, twice), 128 + sig, {"signal"});
    }
  }
  // What batch schedulers send before a kill (SGE -notify, Slurm --signal,
  // a CPU time limit) cleans up the same way.
  for (int sig : {SIGHUP, SIGUSR1, SIGUSR2, SIGXCPU, SIGALRM}) {
    SCOPED_TRACE(absl::StrCat("signal ", sig));
    ExpectCleanFailure(InterruptWhileLoading(sam, sig, false), 128 + sig, {"signal"});
  }
}

TEST_F(ReliabilityTest, SignalWhileEmittingExitsWithSignalStatusAndLeavesNothing) {
  const std::string in = Generate("in.bam", "-n 15000 --seed 72");
  for (const std::string threads : {"", "-@ 2"}) {
    for (int sig : {SIGINT, SIGTERM}) {
      for (bool twice : {false, true}) {
        SCOPED_TRACE(absl::StrCat(threads, " signal ", sig, twice ? " twice" : " once"));
        ExpectCleanFailure(InterruptWhileEmitting(in, threads, sig, twice), 128 + sig, {"signal"});
      }
    }
  }
}

// --- 8. Closed stdout -----------------------------------------------------------------

TEST_F(ReliabilityTest, ClosedStdoutFailsPromptlyWithoutTempData) {
  const std::string in = Generate("in.bam", "-n 15000 --seed 81");
  const std::string cwd = MakeDir("cwd");
  const std::string tmp = MakeDir("tmp");
  // With $TMPDIR the DB goes there; without, into the working directory.
  for (const std::string& env : {"env TMPDIR=" + tmp, std::string("env -u TMPDIR")}) {
    for (const std::string options : {"", "-@ 2 -l 0"}) {
      SCOPED_TRACE(env + " " + options);
      const auto start = std::chrono::steady_clock::now();
      const CommandResult r = RunCommand(absl::StrCat(
          "cd ", cwd, " && ", env, " timeout 60 bash -c '", test_util::RocksortBinary(), " ", options,
          " ", in, " | head -c 100 > /dev/null; exit ${PIPESTATUS[0]}'"));
      const auto elapsed = std::chrono::steady_clock::now() - start;
      EXPECT_LT(elapsed, std::chrono::seconds(20));
      ExpectCleanFailure(r, 1, {"stdout"});
    }
  }
}

// --- 9. A stale temporary directory ---------------------------------------------------

// A directory named like the temporary DB of a run that was killed with
// SIGKILL belongs to nobody rocksort knows: it must survive successful and
// failed runs untouched.
TEST_F(ReliabilityTest, StaleTempDirectoryOfAnotherRunIsLeftUntouched) {
  const std::string in = Generate("in.bam", "-n 1000 --seed 91");
  const std::string tmp = MakeDir("tmp");
  const std::vector<std::string> stale = {dir_.File("out.bam.rocksort.ABC123"),
                                          tmp + "/rocksort.ABC123"};
  std::vector<fs::file_time_type> mtimes;
  for (const std::string& d : stale) {
    fs::create_directories(d);
    test_util::WriteFileOrDie(d + "/000042.sst", "not yours\n");
    mtimes.push_back(fs::last_write_time(d));
  }
  auto expect_stale_intact = [&] {
    for (size_t i = 0; i < stale.size(); ++i) {
      const std::string& d = stale[i];
      ASSERT_TRUE(fs::exists(d + "/000042.sst")) << d;
      EXPECT_EQ(test_util::ReadFileOrDie(d + "/000042.sst"), "not yours\n");
      EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1) << d;
      EXPECT_TRUE(fs::last_write_time(d) == mtimes[i]) << d << " was modified";
    }
  };
  const std::string out = dir_.File("out.bam");
  const std::string bytes = test_util::ReadFileOrDie(in);
  const std::string truncated = dir_.File("truncated.bam");
  test_util::WriteFileOrDie(truncated, bytes.substr(0, bytes.size() / 2));
  for (const std::string& temp : {std::string(""), "-T " + tmp}) {
    SCOPED_TRACE(temp);
    CommandResult r = RunCommand(Rocksort(absl::StrCat(temp, " -o ", out, " ", in)));
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    expect_stale_intact();
    fs::remove(out);
    ExpectNoLeftovers(stale);

    r = RunCommand(Rocksort(absl::StrCat(temp, " -o ", out, " ", truncated)));
    EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
    expect_stale_intact();
    ExpectNoLeftovers(stale);
  }
}

}  // namespace
}  // namespace rocksort
