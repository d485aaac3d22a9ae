#include "pipeline/pipeline.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "common/record_checksum.h"
#include "compaction_policy/compaction_policy.h"
#include "common/allocator.h"
#include "common/interrupt.h"
#include "pipeline/rocksdb_log.h"
#include "pipeline/temp_db.h"
#include "test_util.h"

namespace rocksort::pipeline {
namespace {

using ::rocksort::testing::RunCommand;
using ::rocksort::testing::ScratchDir;

// A SAM with `n` records at colliding positions on three references plus
// unmapped reads, in scrambled order.
std::string MakeSam(int n) {
  std::string sam = "@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:c1\tLN:100000\n@SQ\tSN:c2\tLN:100000\n"
                    "@SQ\tSN:c3\tLN:100000\n@RG\tID:rg1\tSM:s\n";
  uint64_t x = 88172645463325252ULL;
  for (int i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const int kind = static_cast<int>(x % 20);
    const std::string seq(40 + x % 60, "ACGT"[x % 4]);
    const std::string qual(seq.size(), static_cast<char>('!' + x % 40));
    if (kind == 0) {
      absl::StrAppend(&sam, "u", i, "\t4\t*\t0\t0\t*\t*\t0\t0\t", seq, "\t", qual, "\n");
    } else {
      absl::StrAppend(&sam, "r", i, "\t", (x >> 8) % 2 ? 16 : 0, "\tc", 1 + (x >> 9) % 3, "\t",
                      1 + (x >> 12) % 500, "\t60\t", seq.size(), "M\t*\t0\t0\t", seq, "\t", qual,
                      "\tRG:Z:rg1\tXI:i:", i, "\n");
    }
  }
  return sam;
}

class PipelineTest : public ::testing::Test {
 protected:
  SortOptions Options(const std::string& in, const std::string& out) {
    SortOptions o;
    o.input = in;
    o.output = out;
    o.version = "test";
    o.command_line = "rocksort test";
    return o;
  }
  // Sorts with samtools for the expected output.
  std::string SamtoolsSort(const std::string& in) {
    const std::string out = dir_.File("expected.bam");
    const testing::CommandResult r = RunCommand("samtools sort -o " + out + " " + in);
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    return out;
  }
  ScratchDir dir_;
};

TEST_F(PipelineTest, SortEqualsSamtoolsAndLeavesOnlyTheOutput) {
  const std::string in = dir_.File("in.sam");
  testing::WriteFileOrDie(in, MakeSam(5000));
  const std::string expected = SamtoolsSort(in);
  SortReport report;
  const absl::Status s = RunSort(Options(in, dir_.File("out.bam")), nullptr, nullptr, &report);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(report.records, 5000u);
  EXPECT_EQ(testing::CompareAlignmentFiles(expected, dir_.File("out.bam")), "");
  EXPECT_EQ(dir_.List(), (std::vector<std::string>{"expected.bam", "in.sam", "out.bam"}));
}

// Compaction off still merges what the final merge cannot hold: at -m 1M
// its memory reads ~90 runs at one block each.
TEST_F(PipelineTest, TinyMemoryFlushesManyRunsAndMergesThemDown) {
  const std::string in = dir_.File("in.sam");
  testing::WriteFileOrDie(in, MakeSam(300000));
  const std::string expected = SamtoolsSort(in);
  SortOptions o = Options(in, dir_.File("out.bam"));
  o.memory_per_thread = 1 << 20;  // 256 KiB memtables: dozens of runs.
  o.size_hint = 0;                 // No background compaction: all merging is MergeDown's.
  o.disk = DiskKind::kHdd;  // Deterministic K, whatever the machine.
  compaction_policy::PolicyInput policy;
  policy.memory_budget = o.memory_per_thread;
  policy.allow_compaction = false;
  policy.disk = DiskKind::kHdd;
  const int max_final_runs = compaction_policy::MakePlan(policy).max_final_runs;
  SortReport report;
  const absl::Status s = RunSort(o, nullptr, nullptr, &report);
  ASSERT_TRUE(s.ok()) << s;
  // ~40 MB in 256 KiB memtables, ~210 runs (a flush may take two at once):
  // more runs than one merge may read within the memory budget.
  EXPECT_GT(report.runs_flushed, max_final_runs);
  EXPECT_GT(report.intermediate_merges, 0);
  EXPECT_LE(report.runs_merged(), max_final_runs);
  EXPECT_EQ(testing::CompareAlignmentFiles(expected, dir_.File("out.bam")), "");
}

TEST_F(PipelineTest, SizeHintRunsBackgroundCompactionAndStillMatches) {
  const std::string in = dir_.File("in.sam");
  testing::WriteFileOrDie(in, MakeSam(150000));
  const std::string expected = SamtoolsSort(in);
  SortOptions o = Options(in, dir_.File("out.bam"));
  // ~20 MB in 256 KiB memtables: ~80 runs, more than the final merge reads
  // (K = 42 on the ssd profile), and the hint says so.
  o.memory_per_thread = 512 << 10;
  o.threads = 2;
  o.disk = DiskKind::kSsd;
  o.size_hint = 64 << 20;
  // Every run compression: merges while loading and after it, then the
  // final merge, all read and write them.
  std::map<compaction_policy::RunCompression, uint64_t> flushed;
  for (compaction_policy::RunCompression c :
       {compaction_policy::RunCompression::kLz4, compaction_policy::RunCompression::kSnappy,
        compaction_policy::RunCompression::kZstd}) {
    o.run_compression = c;
    SortReport report;
    const absl::Status s = RunSort(o, nullptr, nullptr, &report);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(report.compaction_mode, "planned");
    EXPECT_GT(report.compactions, 0);
    EXPECT_EQ(testing::CompareAlignmentFiles(expected, dir_.File("out.bam")), "");
    flushed[c] = report.flush_bytes;
  }
  // The compression asked for is the one used: zstd's runs are smaller.
  EXPECT_LT(flushed[compaction_policy::RunCompression::kZstd],
            flushed[compaction_policy::RunCompression::kLz4] * 9 / 10);
}

TEST_F(PipelineTest, CorruptInputLeavesNoOutputAndNoTempData) {
  const std::string in = dir_.File("in.sam");
  testing::WriteFileOrDie(in, MakeSam(100) + "bad\tline\n");
  const absl::Status s = RunSort(Options(in, dir_.File("out.bam")), nullptr, nullptr, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("in.sam"), std::string::npos) << s;
  EXPECT_NE(s.message().find("record 101"), std::string::npos) << s;
  EXPECT_EQ(dir_.List(), std::vector<std::string>{"in.sam"});
}

TEST_F(PipelineTest, CancellationLeavesNoOutputAndNoTempData) {
  const std::string in = dir_.File("in.sam");
  testing::WriteFileOrDie(in, MakeSam(1000));
  std::atomic<bool> cancelled{true};
  const absl::Status s = RunSort(Options(in, dir_.File("out.bam")), &cancelled, nullptr, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_EQ(dir_.List(), std::vector<std::string>{"in.sam"});
}

TEST_F(PipelineTest, TempDirectoryGoesUnderPrefixOrBesideOutput) {
  SortOptions o = Options("in.bam", "/data/out.bam");
  EXPECT_EQ(TempDirPrefix(o), "/data/out.bam.rocksort.");
  o.temp_prefix = dir_.path();  // An existing directory.
  EXPECT_EQ(TempDirPrefix(o), dir_.path() + "/rocksort.");
  o.temp_prefix = dir_.File("tmpx");  // A prefix.
  EXPECT_EQ(TempDirPrefix(o), dir_.File("tmpx") + ".rocksort.");
}

// Options for a DB that must not exist yet.
rocksdb::Options NewDbOptions() {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.error_if_exists = true;
  return options;
}

TEST(TempDbTest, FreshDirectoryIsNeverAnExistingOne) {
  ScratchDir dir;
  const rocksdb::Options options = NewDbOptions();
  const std::string prefix = dir.File("rocksort.");
  absl::StatusOr<std::unique_ptr<TempDb>> a = TempDb::Create(prefix, options, 1, nullptr);
  absl::StatusOr<std::unique_ptr<TempDb>> b = TempDb::Create(prefix, options, 1, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->dir(), (*b)->dir());
  EXPECT_TRUE((*a)->Destroy().ok());
  EXPECT_EQ(dir.List().size(), 1u);
  b->reset();
  EXPECT_TRUE(dir.List().empty());
}

TEST(TempDbTest, LanesAreColumnFamiliesDestroyedWithTheDb) {
  ScratchDir dir;
  const rocksdb::Options options = NewDbOptions();
  absl::StatusOr<std::unique_ptr<TempDb>> db =
      TempDb::Create(dir.File("rocksort."), options, 3, nullptr);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::vector<rocksdb::ColumnFamilyHandle*>& lanes = (*db)->lanes();
  ASSERT_EQ(lanes.size(), 3u);
  EXPECT_EQ(lanes[0]->GetName(), rocksdb::kDefaultColumnFamilyName);
  EXPECT_EQ(lanes[1]->GetName(), "lane1");
  EXPECT_EQ(lanes[2]->GetName(), "lane2");
  for (rocksdb::ColumnFamilyHandle* lane : lanes) {
    ASSERT_TRUE((*db)->db()->Put(rocksdb::WriteOptions(), lane, "k", "v").ok());
    ASSERT_TRUE((*db)->db()->Flush(rocksdb::FlushOptions(), lane).ok());
  }
  EXPECT_TRUE((*db)->Destroy().ok());
  EXPECT_TRUE((*db)->lanes().empty());
  EXPECT_TRUE(dir.List().empty());
}

// RocksDB's own LOG file aborted rocksort on a full temp filesystem
// (rocksdb_log.h): a temp DB must never create one, whoever made its options.
TEST(TempDbTest, NeverWritesAnInfoLogFile) {
  ScratchDir dir;
  const rocksdb::Options options = NewDbOptions();
  absl::StatusOr<std::unique_ptr<TempDb>> db =
      TempDb::Create(dir.File("rocksort."), options, 1, nullptr);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)->db()->Put(rocksdb::WriteOptions(), "k", "v").ok());
  ASSERT_TRUE((*db)->db()->Flush(rocksdb::FlushOptions()).ok());
  int tables = 0;
  for (const auto& entry : std::filesystem::directory_iterator((*db)->db_path())) {
    const std::string name = entry.path().filename();
    EXPECT_NE(name.rfind("LOG", 0), 0u) << name;
    if (absl::EndsWith(name, ".sst")) ++tables;
  }
  EXPECT_EQ(tables, 1);  // The listing saw the DB's files.
  EXPECT_TRUE((*db)->Destroy().ok());
  EXPECT_TRUE(dir.List().empty());
}

// Logs `message` at `level` through RocksDB's leveled entry point into a
// logger at `logger_level` writing to a pipe, and returns what it wrote.
std::string LogThrough(rocksdb::InfoLogLevel logger_level, rocksdb::InfoLogLevel level,
                       const std::string& message) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  {
    StderrLogger logger(logger_level, fds[1]);
    rocksdb::Log(level, std::shared_ptr<rocksdb::Logger>(&logger, [](rocksdb::Logger*) {}),
                 "%s", message.c_str());
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, n);
  ::close(fds[0]);
  return out;
}

TEST(StderrLoggerTest, WritesOneLineAtOrAboveItsLevelAndDropsTheRest) {
  using rocksdb::InfoLogLevel;
  EXPECT_EQ(LogThrough(InfoLogLevel::WARN_LEVEL, InfoLogLevel::WARN_LEVEL, "disk full"),
            "rocksort: rocksdb: [WARN] disk full\n");
  EXPECT_EQ(LogThrough(InfoLogLevel::WARN_LEVEL, InfoLogLevel::ERROR_LEVEL, "bad\n"),
            "rocksort: rocksdb: [ERROR] bad\n");
  EXPECT_EQ(LogThrough(InfoLogLevel::WARN_LEVEL, InfoLogLevel::INFO_LEVEL, "flushed"), "");
  // The options dump on open comes as header lines, above every level.
  EXPECT_EQ(LogThrough(InfoLogLevel::WARN_LEVEL, InfoLogLevel::HEADER_LEVEL, "Options"), "");
  EXPECT_EQ(LogThrough(InfoLogLevel::NUM_INFO_LOG_LEVELS, InfoLogLevel::FATAL_LEVEL, "x"), "");
  const std::string cut =
      LogThrough(InfoLogLevel::WARN_LEVEL, InfoLogLevel::WARN_LEVEL, std::string(5000, 'x'));
  EXPECT_EQ(cut.size(), 1024u);
  EXPECT_EQ(cut.substr(0, 26), "rocksort: rocksdb: [WARN] ");
  EXPECT_EQ(cut.back(), '\n');
}

TEST(TempDbTest, MissingParentDirectoryIsAnErrorNamingIt) {
  rocksdb::Options options;
  options.create_if_missing = true;
  absl::StatusOr<std::unique_ptr<TempDb>> db =
      TempDb::Create("/nonexistent-dir-for-rocksort/x.", options, 1, nullptr);
  ASSERT_FALSE(db.ok());
  EXPECT_NE(db.status().message().find("/nonexistent-dir-for-rocksort/x."), std::string::npos);
}

TEST(FitFileNameTest, ShortensOnlyTheLastComponentAndOnlyWhenNeeded) {
  ScratchDir dir;
  if (::pathconf(dir.path().c_str(), _PC_NAME_MAX) != 255) GTEST_SKIP() << "NAME_MAX is not 255";
  // Too long in itself: left to fail when created.
  EXPECT_EQ(FitFileName(dir.File(std::string(300, 'a')), 15), dir.File(std::string(300, 'a')));
  const std::string short_path = dir.File("out.bam");
  EXPECT_EQ(FitFileName(short_path, 16), short_path);
  const std::string long_name(250, 'a');
  // 250 + 15 > 255: the name keeps 240 bytes, the directory all of its own.
  EXPECT_EQ(FitFileName(dir.File(long_name), 15), dir.File(std::string(240, 'a')));
  EXPECT_EQ(FitFileName(long_name, 15), std::string(240, 'a'));
  EXPECT_EQ(FitFileName(long_name, 5), long_name);
  // Not in the middle of a UTF-8 character: "a" then 125 two-byte
  // characters; byte 240 continues the one at 239.
  std::string utf8 = "a";
  for (int i = 0; i < 125; ++i) utf8 += "\xc3\xa9";
  EXPECT_EQ(FitFileName(dir.File(utf8), 15), dir.File(utf8.substr(0, 239)));
}

TEST(OutputFileTest, UncommittedOutputIsRemoved) {
  ScratchDir dir;
  {
    absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create(dir.File("o.bam"), nullptr);
    ASSERT_TRUE(out.ok());
    ASSERT_EQ(::write((*out)->fd(), "x", 1), 1);
    EXPECT_EQ(dir.List().size(), 1u);
  }
  EXPECT_TRUE(dir.List().empty());
  absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create(dir.File("o.bam"), nullptr);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE((*out)->Finish().ok());
  ASSERT_TRUE((*out)->Commit().ok());
  EXPECT_EQ(dir.List(), std::vector<std::string>{"o.bam"});
}

// An output that is a symlink keeps the link: the new file replaces the
// link's target (as writing through it would), and the partial file goes
// beside the target, not beside the link.
TEST(OutputFileTest, SymlinkKeepsTheLinkAndReplacesItsTarget) {
  ScratchDir dir;
  ASSERT_EQ(::mkdir(dir.File("real").c_str(), 0700), 0);
  const std::string target = dir.File("real/x.bam");
  testing::WriteFileOrDie(target, "old");
  const std::string link = dir.File("link.bam");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create(link, nullptr);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE((*out)->is_stream());
  EXPECT_EQ((*out)->name(), link);  // Messages name what the user gave.
  EXPECT_EQ(dir.List().size(), 2u);  // real/ and link.bam: the partial is in real/.
  ASSERT_EQ(::write((*out)->fd(), "new", 3), 3);
  ASSERT_TRUE((*out)->Finish().ok());
  ASSERT_TRUE((*out)->Commit().ok());
  struct stat st;
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(testing::ReadFileOrDie(target), "new");
  std::vector<std::string> in_real;
  for (const auto& entry : std::filesystem::directory_iterator(dir.File("real"))) {
    in_real.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(in_real, std::vector<std::string>{"x.bam"});
}

// A registry that refuses to publish, as InterruptGuard does after a signal.
class RefusingRegistry : public CleanupRegistry {
 public:
  void Register(const std::string& path) override { paths.push_back(path); }
  void Unregister(const std::string&) override {}
  absl::Status Publish(const std::string&, absl::FunctionRef<absl::Status()>) override {
    return absl::CancelledError("interrupted before the output was committed");
  }
  std::vector<std::string> paths;
};

TEST(OutputFileTest, RefusedPublishLeavesNoOutput) {
  ScratchDir dir;
  RefusingRegistry registry;
  {
    absl::StatusOr<std::unique_ptr<OutputFile>> out =
        OutputFile::Create(dir.File("o.bam"), &registry);
    ASSERT_TRUE(out.ok());
    ASSERT_EQ(registry.paths.size(), 1u);
    ASSERT_TRUE((*out)->Finish().ok());
    EXPECT_EQ((*out)->Commit().code(), absl::StatusCode::kCancelled);
  }
  EXPECT_TRUE(dir.List().empty());
}

// The commit point and the guard's forced exit exclude each other. Run in a
// child process (a death test forks one): the guard must be created before
// any other thread, so that every thread blocks the signals.
TEST(InterruptGuardDeathTest, NoPublishAfterASignal) {
  EXPECT_EXIT(
      {
        InterruptGuard guard(absl::Seconds(30));
        ::kill(::getpid(), SIGINT);
        while (!guard.cancelled().load()) ::usleep(1000);
        bool published = false;
        const absl::Status s = guard.Publish("p", [&] {
          published = true;
          return absl::OkStatus();
        });
        std::_Exit(!published && s.code() == absl::StatusCode::kCancelled ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(InterruptGuardDeathTest, PublishedRunIsNotForcedToExitByALateSignal) {
  EXPECT_EXIT(
      {
        InterruptGuard guard(absl::Milliseconds(50));
        const absl::Status s = guard.Publish("p", [] { return absl::OkStatus(); });
        // A signal after the commit point: the grace period passes without
        // a forced _exit(130), because there is nothing left to undo.
        ::kill(::getpid(), SIGTERM);
        while (!guard.cancelled().load()) ::usleep(1000);
        ::usleep(500 * 1000);
        std::_Exit(s.ok() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(InterruptGuardDeathTest, UnpublishedRunIsForcedToExitAfterTheGracePeriod) {
  EXPECT_EXIT(
      {
        InterruptGuard guard(absl::Milliseconds(50));
        ::kill(::getpid(), SIGTERM);
        ::usleep(5 * 1000 * 1000);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(128 + SIGTERM), "terminated by signal");
}

TEST(CancelWatchTest, CallsOnceAfterTheFlagIsSet) {
  std::atomic<bool> cancelled{false};
  absl::Notification called;
  std::atomic<int> calls{0};
  {
    CancelWatch watch(&cancelled, [&] {
      ++calls;
      called.Notify();
    }, absl::Milliseconds(1));
    ::usleep(20 * 1000);
    EXPECT_EQ(calls.load(), 0);  // Not before.
    cancelled.store(true);
    EXPECT_TRUE(called.WaitForNotificationWithTimeout(absl::Seconds(10)));
    ::usleep(20 * 1000);
  }
  EXPECT_EQ(calls.load(), 1);
}

TEST(CancelWatchTest, NeverCallsAfterItIsGone) {
  std::atomic<bool> cancelled{false};
  std::atomic<int> calls{0};
  const absl::Time start = absl::Now();
  {
    // A long poll: the destructor must not wait for it.
    CancelWatch watch(&cancelled, [&] { ++calls; }, absl::Seconds(60));
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  cancelled.store(true);
  ::usleep(20 * 1000);
  EXPECT_EQ(calls.load(), 0);
  CancelWatch no_flag(nullptr, [&] { ++calls; });  // Nothing to watch.
  EXPECT_EQ(calls.load(), 0);
}

// A device or FIFO is written in place: renaming a finished file over
// /dev/null (as root) would replace the device node.
TEST(OutputFileTest, DeviceIsWrittenInPlace) {
  struct stat before;
  ASSERT_EQ(::stat("/dev/null", &before), 0);
  ASSERT_TRUE(S_ISCHR(before.st_mode));
  {
    absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create("/dev/null", nullptr);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE((*out)->is_stream());
    ASSERT_EQ(::write((*out)->fd(), "x", 1), 1);
    ASSERT_TRUE((*out)->Finish().ok());
    ASSERT_TRUE((*out)->Commit().ok());
  }
  struct stat after;
  ASSERT_EQ(::stat("/dev/null", &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode));
  EXPECT_EQ(after.st_ino, before.st_ino);
}

TEST(OutputFileTest, FifoIsWrittenInPlace) {
  ScratchDir dir;
  const std::string fifo = dir.File("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A reader, so that opening the FIFO for writing does not block.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  {
    absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create(fifo, nullptr);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(::write((*out)->fd(), "xy", 2), 2);
    ASSERT_TRUE((*out)->Finish().ok());
    ASSERT_TRUE((*out)->Commit().ok());
  }
  char buf[4];
  EXPECT_EQ(::read(reader, buf, sizeof(buf)), 2);
  ::close(reader);
  EXPECT_EQ(dir.List(), std::vector<std::string>{"fifo"});  // No partial file left.
}

TEST(PipelineTempDirTest, StreamOutputsPutTempDataUnderTmpdir) {
  ScratchDir dir;
  const char* old_tmpdir = std::getenv("TMPDIR");
  const std::string saved = old_tmpdir != nullptr ? old_tmpdir : "";
  ::setenv("TMPDIR", dir.path().c_str(), 1);
  SortOptions o;
  o.input = "in.bam";
  o.output = "/dev/null";
  EXPECT_EQ(TempDirPrefix(o), dir.path() + "/rocksort.");
  o.output = "-";
  EXPECT_EQ(TempDirPrefix(o), dir.path() + "/rocksort.");
  if (old_tmpdir != nullptr) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
}

}  // namespace
}  // namespace rocksort::pipeline

namespace rocksort::pipeline {
namespace {

TEST(VerifyIntegrityTest, AnyDifferenceBetweenLoadedAndEmittedIsDataLoss) {
  loader::LoadStats loaded;
  loaded.records = 10;
  loaded.record_bytes = 4000;
  loaded.checksum = 0x1234;
  emitter::EmitStats emitted;
  emitted.records = 10;
  emitted.record_bytes = 4000;
  emitted.checksum = 0x1234;
  EXPECT_TRUE(VerifyIntegrity(loaded, emitted, "o.bam").ok());
  emitted.checksum = 0x1235;
  const absl::Status s = VerifyIntegrity(loaded, emitted, "o.bam");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("o.bam"), std::string::npos);
  emitted.checksum = loaded.checksum;
  emitted.records = 9;
  EXPECT_FALSE(VerifyIntegrity(loaded, emitted, "o.bam").ok());
}

// Memtable arena blocks must come from the heap (common/allocator.h) so
// that the next memtable reuses a flushed one's blocks: mapped, every
// memtable faulted in all of its pages afresh (2.8 million page faults and
// ~36 CPU s on the 2 GiB benchmark, most of them in the loading thread).
TEST(AllocatorTest, MemtableArenaBlocksStayBelowTheHeapBlockLimitAtEveryBudget) {
  for (uint64_t budget = uint64_t{1} << 20; budget <= uint64_t{1} << 40; budget <<= 1) {
    compaction_policy::PolicyInput input;
    input.memory_budget = budget;
    input.threads = 2;
    const compaction_policy::SortPlan plan = compaction_policy::MakePlan(input);
    EXPECT_LT(plan.options.arena_block_size, kHeapBlockLimit) << "budget " << budget;
  }
}

TEST(RecordChecksumTest, IgnoresOrderButSeesEveryByte) {
  RecordChecksum a, b, c, pieces;
  a.AddRecord("alpha", 5);
  a.AddRecord("beta", 4);
  b.AddRecord("beta", 4);
  b.AddRecord("alpha", 5);
  EXPECT_EQ(a.value(), b.value());
  c.AddRecord("alphb", 5);
  c.AddRecord("beta", 4);
  EXPECT_NE(a.value(), c.value());
  pieces.AddPiece("al", 2);
  pieces.AddPiece("pha", 3);
  pieces.EndRecord();
  pieces.AddRecord("beta", 4);
  EXPECT_EQ(a.value(), pieces.value());
  RecordChecksum duplicated;
  duplicated.AddRecord("alpha", 5);
  duplicated.AddRecord("alpha", 5);
  duplicated.AddRecord("beta", 4);
  EXPECT_NE(a.value(), duplicated.value());
}

}  // namespace
}  // namespace rocksort::pipeline

namespace rocksort::pipeline {
namespace {

// SIGINT/SIGTERM set the same flag the guard hands to RunSort; here the flag
// is set as each phase starts, so every phase's unwinding is exercised.
class CancelAtPhaseTest : public ::testing::TestWithParam<Phase> {};

TEST_P(CancelAtPhaseTest, CancellationInEachPhaseLeavesNoOutputAndNoTempData) {
  ScratchDir dir;
  const std::string in = dir.File("in.sam");
  testing::WriteFileOrDie(in, MakeSam(20000));
  std::atomic<bool> cancelled{false};
  SortOptions o;
  o.input = in;
  o.output = dir.File("out.bam");
  o.memory_per_thread = 1 << 20;  // Many runs, so merging has work to do.
  o.disk = DiskKind::kHdd;
  o.on_phase = [&](Phase phase) {
    if (phase == GetParam()) cancelled = true;
  };
  const absl::Status s = RunSort(o, &cancelled, nullptr, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_EQ(dir.List(), std::vector<std::string>{"in.sam"});
}

INSTANTIATE_TEST_SUITE_P(AllPhases, CancelAtPhaseTest,
                         ::testing::Values(Phase::kLoad, Phase::kMerge, Phase::kEmit));

}  // namespace
}  // namespace rocksort::pipeline
