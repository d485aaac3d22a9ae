// The status line: its formatting from fixed counters, and the real thing
// through a terminal (tmux): it appears with the phases while a sort runs,
// is erased at the end, and is absent when stderr is a file unless forced.
#include "progress.h"

#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace rocksort::tools {
namespace {

using pipeline::Phase;
using test_util::CommandResult;
using test_util::RunCommand;
using test_util::ScratchDir;

TEST(FormatProgress, CountsBytesAndDurations) {
  EXPECT_EQ(FormatCount(0), "0");
  EXPECT_EQ(FormatCount(999), "999");
  EXPECT_EQ(FormatCount(1000), "1.00k");
  EXPECT_EQ(FormatCount(12345), "12.3k");
  EXPECT_EQ(FormatCount(123456), "123k");
  EXPECT_EQ(FormatCount(999700), "1.00M");  // Rounding carries into the next unit.
  EXPECT_EQ(FormatCount(27'100'000), "27.1M");
  EXPECT_EQ(FormatCount(3'000'000'000), "3.00G");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1024), "1.00 KiB");
  EXPECT_EQ(FormatBytes(uint64_t{3} << 29), "1.50 GiB");
  EXPECT_EQ(FormatBytes(uint64_t{100} << 20), "100 MiB");
  EXPECT_EQ(FormatDuration(0), "0:00");
  EXPECT_EQ(FormatDuration(83.4), "1:23");
  EXPECT_EQ(FormatDuration(3599.6), "1:00:00");
  EXPECT_EQ(FormatDuration(3 * 3600 + 5 * 60 + 7), "3:05:07");
  EXPECT_EQ(FormatDuration(-5), "0:00");
}

TEST(FormatProgress, ReadingAFileShowsPercentRateAndEta) {
  ProgressSample s;
  s.phase = Phase::kLoad;
  s.seconds = 10;
  s.records = 3'100'000;
  s.bytes = uint64_t{1} << 30;        // A quarter of the input ...
  s.bytes_total = uint64_t{4} << 30;  // ... in 10 s: 30 s to go.
  EXPECT_EQ(FormatStatusLine(s),
            "rocksort: reading 25.0%  3.10M records  1.00 GiB of 4.00 GiB  310k rec/s  ETA 0:30");
}

TEST(FormatProgress, ReadingAPipeShowsRecordsAndRateOnly) {
  ProgressSample s;
  s.phase = Phase::kLoad;
  s.seconds = 4;
  s.records = 1'000'000;
  s.bytes = 123 << 20;
  EXPECT_EQ(FormatStatusLine(s), "rocksort: reading  1.00M records  123 MiB  250k rec/s");
}

TEST(FormatProgress, NoRateOrEtaInTheFirstSecond) {
  ProgressSample s;
  s.phase = Phase::kLoad;
  s.seconds = 0.25;
  s.records = 5000;
  s.bytes = 1000;
  s.bytes_total = 10000;
  EXPECT_EQ(FormatStatusLine(s), "rocksort: reading 10.0%  5.00k records  1000 B of 9.77 KiB");
}

TEST(FormatProgress, MergingShowsTheTimeSoFar) {
  ProgressSample s;
  s.phase = Phase::kMerge;
  s.seconds = 72;
  s.records = 27'100'000;
  EXPECT_EQ(FormatStatusLine(s), "rocksort: merging  27.1M records  1:12");
}

TEST(FormatProgress, WritingCountsAgainstTheRecordsLoaded) {
  ProgressSample s;
  s.phase = Phase::kEmit;
  s.seconds = 5;
  s.records = 2'000'000;
  s.records_total = 8'000'000;  // A quarter in 5 s: 15 s to go.
  s.bytes = uint64_t{600} << 20;
  EXPECT_EQ(FormatStatusLine(s),
            "rocksort: writing 25.0%  2.00M of 8.00M records  600 MiB  400k rec/s  ETA 0:15");
  s.records = s.records_total;  // Done: no ETA.
  EXPECT_EQ(FormatStatusLine(s),
            "rocksort: writing 100.0%  8.00M of 8.00M records  600 MiB  1.60M rec/s");
}

// A shell pipeline that sorts `input` to `output` slowly however fast the
// machine is: the input reaches rocksort's stdin in two parts a second
// apart, and its stdout drains into `output` only after a second, so both
// reading and writing outlast several 250 ms ticks of the status line.
std::string SlowSort(const std::string& rocksort_args, const std::string& input,
                     const std::string& output) {
  return absl::StrCat("{ head -c 65536 ", input, "; sleep 1; tail -c +65537 ", input, "; } | ",
                      test_util::RocksortBinary(), " ", rocksort_args, " - | { sleep 1; cat > ",
                      output, "; }");
}

// Runs rocksort on a terminal: a tmux pane of its own server. The pane's
// output is logged from before rocksort starts (pipe-pane), so every redraw
// is seen, and the screen is captured once rocksort has exited.
class ProgressOnATerminal : public ::testing::Test {
 protected:
  void SetUp() override {
    if (RunCommand("command -v tmux").exit_code != 0) {
      GTEST_SKIP() << "tmux is not installed (scripts/setup.sh test installs it); the status "
                      "line needs a real terminal to be tested";
    }
    input_ = dir_.File("in.bam");
    const CommandResult gen = RunCommand(
        absl::StrCat(test_util::GenReadsBinary(), " -n 50000 --seed 7 --refs 3 -o ", input_));
    ASSERT_EQ(gen.exit_code, 0) << gen.stderr_text;
  }

  void TearDown() override {
    if (started_) RunCommand(Tmux("kill-server"));
  }

  std::string Tmux(const std::string& args) const {
    return absl::StrCat("tmux -S ", dir_.File("tmux.sock"), " ", args);
  }

  // Runs the shell command `command` (bash, pipefail) in the pane and
  // waits for it to exit; fills pane_log_ (every byte the pane received) and
  // screen_ (the final screen).
  void RunInPane(const std::string& command) {
    const std::string script = dir_.File("run.sh");
    test_util::WriteFileOrDie(
        script,
        absl::StrCat("set -o pipefail\nwhile [ ! -e ", dir_.File("go"), " ]; do sleep 0.05; done\n",
                     command, "\necho \"exit=$?\" > ", dir_.File("status.tmp"), " && mv ",
                     dir_.File("status.tmp"), " ", dir_.File("status"), "\nexec sleep 600\n"));
    started_ = true;
    ASSERT_EQ(
        RunCommand(Tmux(absl::StrCat("new-session -d -x 200 -y 50 'bash ", script, "'"))).exit_code,
        0);
    ASSERT_EQ(RunCommand(Tmux(absl::StrCat("pipe-pane -o 'cat > ", dir_.File("pane.log"), "'")))
                  .exit_code,
              0);
    test_util::WriteFileOrDie(dir_.File("go"), "");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
    while (RunCommand(absl::StrCat("test -e ", dir_.File("status"))).exit_code != 0) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "rocksort did not finish";
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(test_util::ReadFileOrDie(dir_.File("status")), "exit=0\n");
    screen_ = RunCommand(Tmux("capture-pane -p")).stdout_text;
    // pipe-pane's cat may lag the pane a little.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    pane_log_ = test_util::ReadFileOrDie(dir_.File("pane.log"));
  }

  ScratchDir dir_;
  std::string input_;
  bool started_ = false;
  std::string pane_log_;
  std::string screen_;
};

TEST_F(ProgressOnATerminal, StatusLineShowsThePhasesAndIsErasedAtTheEnd) {
  RunInPane(SlowSort("", input_, dir_.File("out.bam")));
  // Redrawn in place, with the records read while reading (stdin: no
  // percentage) and the records' percentage while writing.
  EXPECT_TRUE(absl::StrContains(pane_log_, "\rrocksort: reading ")) << pane_log_;
  EXPECT_TRUE(absl::StrContains(pane_log_, " records  ")) << pane_log_;
  EXPECT_TRUE(absl::StrContains(pane_log_, "\rrocksort: writing ")) << pane_log_;
  EXPECT_TRUE(absl::StrContains(pane_log_, "% ")) << pane_log_;
  EXPECT_TRUE(absl::StrContains(pane_log_, "\r\x1b[K")) << pane_log_;
  // Erased: nothing of it is left on the screen.
  EXPECT_FALSE(absl::StrContains(screen_, "rocksort")) << screen_;
  EXPECT_FALSE(absl::StrContains(screen_, "records")) << screen_;
  // And the sort itself was not disturbed.
  EXPECT_EQ(RunCommand(absl::StrCat("samtools quickcheck ", dir_.File("out.bam"))).exit_code, 0);
}

TEST_F(ProgressOnATerminal, NoProgressKeepsTheTerminalQuiet) {
  RunInPane(SlowSort("--no-progress", input_, dir_.File("out.bam")));
  EXPECT_FALSE(absl::StrContains(pane_log_, "rocksort")) << pane_log_;
}

// Through a pipe, to see every byte: the line is drawn once a phase has
// begun, a message erases it first and starts on a line of its own, and
// Stop erases the line again.
TEST(ProgressDisplay, MessagesEraseTheLineFirst) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pipeline::SortProgress progress;
  progress.records_loaded = 1234;
  progress.input_size = 1000;
  progress.input_bytes = 500;
  {
    ProgressDisplay display(progress, fds[1], std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // No phase yet: nothing drawn.
    display.OnPhase(Phase::kLoad);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    display.Print("rocksort: warning: something");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    display.Stop();
    display.Print("rocksort: after");
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, n);
  ::close(fds[0]);
  const std::string line = "\rrocksort: reading 50.0%  1.23k records  500 B of 1000 B\x1b[K";
  EXPECT_TRUE(absl::StartsWith(out, line)) << absl::CEscape(out);
  const size_t warning = out.find("rocksort: warning: something\n");
  ASSERT_NE(warning, std::string::npos) << absl::CEscape(out);
  EXPECT_EQ(out.substr(warning - 4, 4), "\r\x1b[K") << absl::CEscape(out);
  // Drawn again after the message, and erased by Stop, before "after".
  EXPECT_NE(out.find(line, warning), std::string::npos) << absl::CEscape(out);
  EXPECT_TRUE(absl::EndsWith(out, "\r\x1b[Krocksort: after\n")) << absl::CEscape(out);
}

TEST(ProgressToAFile, AbsentUnlessForced) {
  ScratchDir dir;
  const std::string input = dir.File("in.bam");
  ASSERT_EQ(RunCommand(absl::StrCat(test_util::GenReadsBinary(), " -n 50000 --seed 3 -o ", input))
                .exit_code,
            0);
  CommandResult r = RunCommand(absl::StrCat("set -e; ", SlowSort("", input, dir.File("a.bam")),
                                            "; samtools quickcheck ", dir.File("a.bam")));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stderr_text, "");
  r = RunCommand(absl::StrCat("set -e; ", SlowSort("--progress", input, dir.File("b.bam")),
                              "; samtools quickcheck ", dir.File("b.bam")));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "\rrocksort: reading ")) << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "\rrocksort: writing ")) << r.stderr_text;
  // Erased at the end: the last thing written.
  EXPECT_TRUE(absl::EndsWith(r.stderr_text, "\r\x1b[K")) << r.stderr_text;
}

}  // namespace
}  // namespace rocksort::tools
