// End-to-end: the rocksort binary against `samtools sort` on generated
// inputs. "Identical" means the same header apart from @PG and the same
// records in the same order, and also the same decompressed record bytes.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace rocksort {
namespace {

using testing::CommandResult;
using testing::RunCommand;
using testing::ScratchDir;

class EndToEndTest : public ::testing::Test {
 protected:
  // Generates an input with gen_reads; `args` are extra generator flags.
  std::string Generate(const std::string& name, const std::string& args) {
    const std::string path = dir_.File(name);
    const CommandResult r =
        RunCommand(absl::StrCat(testing::GenReadsBinary(), " ", args, " -o ", path));
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    return path;
  }

  std::string SamtoolsSort(const std::string& in) {
    const std::string out = dir_.File("expected.bam");
    const CommandResult r = RunCommand(absl::StrCat("samtools sort -o ", out, " ", in));
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    return out;
  }

  // Runs rocksort with `args` (which must write dir_/out.bam) and checks the
  // result against samtools sort of `in`, record for record and byte for
  // byte, and that no temporary data is left beside the output.
  void ExpectSameAsSamtools(const std::string& in, const std::string& args) {
    const std::string expected = SamtoolsSort(in);
    const std::string out = dir_.File("out.bam");
    const CommandResult r = RunCommand(absl::StrCat(testing::RocksortBinary(), " ", args));
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_EQ(RunCommand("samtools quickcheck " + out).exit_code, 0);
    EXPECT_EQ(testing::CompareAlignmentFiles(expected, out), "");
    absl::StatusOr<std::string> expected_bytes = testing::ReadBamRecordBytes(expected);
    absl::StatusOr<std::string> actual_bytes = testing::ReadBamRecordBytes(out);
    ASSERT_TRUE(expected_bytes.ok() && actual_bytes.ok());
    EXPECT_TRUE(*expected_bytes == *actual_bytes) << "decompressed record bytes differ";
    for (const std::string& name : dir_.List()) {
      EXPECT_EQ(name.find("rocksort."), std::string::npos) << "left behind: " << name;
      EXPECT_EQ(name.find(".partial."), std::string::npos) << "left behind: " << name;
    }
  }

  // ExpectSameAsSamtools with `--stats-json` added to `args` (which must name
  // the input last, or redirect stdin); returns the statistics written.
  std::string ExpectSameAsSamtoolsWithStats(const std::string& in, const std::string& args) {
    const std::string stats = dir_.File("stats.json");
    ExpectSameAsSamtools(in, absl::StrCat("--stats-json ", stats, " -o ", dir_.File("out.bam"),
                                          " ", args));
    return testing::ReadFileOrDie(stats);
  }

  ScratchDir dir_;
};

TEST_F(EndToEndTest, DefaultSettingsMatchSamtools) {
  const std::string in = Generate("in.bam", "-n 20000 --seed 1");
  ExpectSameAsSamtools(in, "-o " + dir_.File("out.bam") + " " + in);
}

TEST_F(EndToEndTest, TinyMemoryManyRunsMatchSamtools) {
  const std::string in = Generate("in.bam", "-n 40000 --seed 2 --tie-frac 0.3");
  ExpectSameAsSamtools(in, "-@ 2 -m 1M -o " + dir_.File("out.bam") + " " + in);
}

TEST_F(EndToEndTest, EdgeCasesMatchSamtools) {
  // Records > 64 KiB, CIGARs > 65535 ops, huge aux tags, unmapped reads,
  // first and last positions, heavy ties.
  const std::string in = Generate("in.bam", "-n 3000 --seed 3 --edge-cases");
  ExpectSameAsSamtools(in, "-m 2M -o " + dir_.File("out.bam") + " " + in);
}

TEST_F(EndToEndTest, SamTextFromStdinMatchesSamtools) {
  const std::string in = Generate("in.sam", "-n 20000 --seed 4");
  ExpectSameAsSamtools(in, absl::StrCat("-@ 2 -o ", dir_.File("out.bam"), " - < ", in));
}

TEST_F(EndToEndTest, PipeFromGeneratorToStdoutMatchesSamtools) {
  const std::string in = Generate("in.sam", "-n 5000 --seed 5");
  ExpectSameAsSamtools(in, absl::StrCat("< ", in, " > ", dir_.File("out.bam")));
}

TEST_F(EndToEndTest, UncompressedAndLevelOneOutputsMatchSamtools) {
  const std::string in = Generate("in.bam", "-n 5000 --seed 6");
  ExpectSameAsSamtools(in, absl::StrCat("-u ", in, " ", dir_.File("out.bam")));
  ExpectSameAsSamtools(in, absl::StrCat("-l 1 -@ 3 ", in, " ", dir_.File("out.bam")));
}

TEST_F(EndToEndTest, SizeHintPlansBackgroundCompactionAndMatchesSamtools) {
  const std::string in = Generate("in.bam", "-n 40000 --seed 7");
  const std::string json = ExpectSameAsSamtoolsWithStats(in, "-@ 2 -m 1M -s 64M --disk hdd " + in);
  EXPECT_NE(json.find("\"compaction_mode\": \"planned\""), std::string::npos) << json;
  EXPECT_EQ(json.find("\"compactions\": 0,"), std::string::npos) << json;
}

TEST_F(EndToEndTest, PipeInputStartsCompactionAdaptivelyAndMatchesSamtools) {
  const std::string in = Generate("in.bam", "-n 40000 --seed 11");
  const std::string json = ExpectSameAsSamtoolsWithStats(in, "-@ 2 -m 1M --disk hdd - < " + in);
  EXPECT_NE(json.find("\"compaction_mode\": \"adaptive\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"adaptive_compaction_started\": true"), std::string::npos) << json;
}

TEST_F(EndToEndTest, NoCompactionMergesOnlyAtTheEndAndMatchesSamtools) {
  const std::string in = Generate("in.bam", "-n 40000 --seed 12");
  const std::string json =
      ExpectSameAsSamtoolsWithStats(in, "-m 1M --no-compaction --disk ssd " + in);
  EXPECT_NE(json.find("\"compaction_mode\": \"off\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"adaptive_compaction_started\": false"), std::string::npos) << json;
}

TEST_F(EndToEndTest, TwoLanesMergedDownInParallelMatchSamtools) {
  // -@ 2: runs alternate between two column families, each merged down by
  // its own thread after loading, and the emitter merges the two.
  const std::string in = Generate("in.bam", "-n 40000 --seed 14 --tie-frac 0.3");
  const std::string json =
      ExpectSameAsSamtoolsWithStats(in, "-@ 2 -m 1M --no-compaction --disk hdd " + in);
  EXPECT_NE(json.find("\"lanes\": 2,"), std::string::npos) << json;
  EXPECT_EQ(json.find("\"intermediate_merges\": 0,"), std::string::npos) << json;
  EXPECT_EQ(json.find("\"intermediate_merges\": 1,"), std::string::npos) << json;
  // Both lanes got runs: "runs_at_final_merge_per_lane": [a, b], a, b > 0.
  const std::string key = "\"runs_at_final_merge_per_lane\": [";
  const size_t at = json.find(key);
  ASSERT_NE(at, std::string::npos) << json;
  int a = 0, b = 0;
  ASSERT_EQ(std::sscanf(json.c_str() + at + key.size(), "%d, %d]", &a, &b), 2) << json;
  EXPECT_GT(a, 0) << json;
  EXPECT_GT(b, 0) << json;
}

// Regression: RocksDB 7.8.3 reports CompactFiles (rocksort's intermediate
// merges) only through its out-parameter, so the statistics missed them.
TEST_F(EndToEndTest, IntermediateMergesCountInWriteAmplification) {
  const std::string in = Generate("in.bam", "-n 40000 --seed 13");
  const std::string json =
      ExpectSameAsSamtoolsWithStats(in, "-m 1M --no-compaction --disk hdd " + in);
  ASSERT_EQ(json.find("\"intermediate_merges\": 0,"), std::string::npos) << json;
  EXPECT_EQ(json.find("\"compactions\": 0,"), std::string::npos) << json;
  EXPECT_EQ(json.find("\"write_amplification\": 1.000"), std::string::npos) << json;
  EXPECT_EQ(json.find("\"intermediate_merge_bytes\": 0,"), std::string::npos) << json;
  // Compaction off: every run flushed is still there when loading ends, and
  // the merges after loading take them down to what the final merge reads.
  const auto number_after = [&json](const std::string& key) {
    const size_t at = json.find(key);
    int value = -1;
    if (at != std::string::npos) std::sscanf(json.c_str() + at + key.size(), "%d", &value);
    return value;
  };
  const int flushed = number_after("\"runs_flushed\": ");
  EXPECT_GT(flushed, 0) << json;
  EXPECT_EQ(number_after("\"runs_after_load_per_lane\": ["), flushed) << json;
  EXPECT_LT(number_after("\"runs_at_final_merge\": "), flushed) << json;
}

TEST_F(EndToEndTest, ZeroRecordsGiveAValidEmptyBam) {
  const std::string in = dir_.File("empty.sam");
  testing::WriteFileOrDie(in, "@HD\tVN:1.6\n@SQ\tSN:chr1\tLN:1000\n");
  ExpectSameAsSamtools(in, absl::StrCat(in, " ", dir_.File("out.bam")));
}

TEST_F(EndToEndTest, UnmappedOnlyInputKeepsInputOrder) {
  std::string sam = "@HD\tVN:1.6\n@SQ\tSN:chr1\tLN:1000\n";
  for (int i = 0; i < 3000; ++i) {
    absl::StrAppend(&sam, "u", (i * 7919) % 3000, "\t4\t*\t0\t0\t*\t*\t0\t0\tACGTN\tIIIII\n");
  }
  const std::string in = dir_.File("unmapped.sam");
  testing::WriteFileOrDie(in, sam);
  ExpectSameAsSamtools(in, absl::StrCat("-m 1M ", in, " ", dir_.File("out.bam")));
}

TEST_F(EndToEndTest, HeaderWithoutHdGetsSortOrder) {
  const std::string in = dir_.File("nohd.sam");
  testing::WriteFileOrDie(in,
                          "@SQ\tSN:chr1\tLN:1000\n"
                          "b\t0\tchr1\t20\t60\t2M\t*\t0\t0\tAC\tII\n"
                          "a\t0\tchr1\t10\t60\t2M\t*\t0\t0\tAC\tII\n");
  ExpectSameAsSamtools(in, absl::StrCat(in, " ", dir_.File("out.bam")));
  absl::StatusOr<testing::AlignmentFile> out = testing::ReadAlignmentFile(dir_.File("out.bam"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->header_without_pg.rfind("@HD\tVN:", 0), 0u) << out->header_without_pg;
  EXPECT_NE(out->header_without_pg.find("SO:coordinate"), std::string::npos);
}

TEST_F(EndToEndTest, PgLineRecordsTheCommandUnlessDisabled) {
  const std::string in = Generate("in.bam", "-n 100 --seed 8");
  const std::string out = dir_.File("out.bam");
  ASSERT_EQ(RunCommand(absl::StrCat(testing::RocksortBinary(), " ", in, " ", out)).exit_code, 0);
  CommandResult h = RunCommand("samtools view -H " + out);
  EXPECT_NE(h.stdout_text.find("@PG\tID:rocksort"), std::string::npos) << h.stdout_text;
  ASSERT_EQ(RunCommand(absl::StrCat(testing::RocksortBinary(), " --no-PG ", in, " ", out)).exit_code,
            0);
  h = RunCommand("samtools view --no-PG -H " + out);
  EXPECT_EQ(h.stdout_text.find("ID:rocksort"), std::string::npos) << h.stdout_text;
}

TEST_F(EndToEndTest, CorruptInputFailsWithoutOutputOrTempData) {
  const std::string in = Generate("in.bam", "-n 20000 --seed 9");
  const std::string truncated = dir_.File("trunc.bam");
  const std::string bytes = testing::ReadFileOrDie(in);
  testing::WriteFileOrDie(truncated, bytes.substr(0, bytes.size() / 2));
  const CommandResult r = RunCommand(
      absl::StrCat(testing::RocksortBinary(), " -o ", dir_.File("out.bam"), " ", truncated));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.stderr_text.find("trunc.bam"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("record"), std::string::npos) << r.stderr_text;
  EXPECT_EQ(dir_.List(), (std::vector<std::string>{"in.bam", "trunc.bam"}));
}

// A signal while the loader waits on a silent pipe: the guard must remove the
// temp DB and the partial output and exit 128 + signal.
TEST_F(EndToEndTest, SignalWhileReadingStdinCleansUp) {
  for (int sig : {SIGINT, SIGTERM}) {
    const std::string fifo = dir_.File("fifo");
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    const std::string script = absl::StrCat(
        "(printf '@SQ\\tSN:c\\tLN:9\\nr\\t0\\tc\\t1\\t9\\t1M\\t*\\t0\\t0\\tA\\tI\\n'; sleep 30) > ",
        fifo, " & feeder=$!; ", testing::RocksortBinary(), " -o ", dir_.File("out.bam"), " - < ",
        fifo, " & pid=$!; sleep 1; kill -", sig, " $pid; wait $pid; code=$?; kill $feeder; ",
        "exit $code");
    const CommandResult r = RunCommand(script);
    EXPECT_EQ(r.exit_code, 128 + sig) << r.stderr_text;
    unlink(fifo.c_str());
    EXPECT_TRUE(dir_.List().empty()) << dir_.List().front();
  }
}

TEST_F(EndToEndTest, ClosedStdoutFailsCleanly) {
  const std::string in = Generate("in.bam", "-n 20000 --seed 10");
  const CommandResult status = RunCommand(absl::StrCat(
      "cd ", dir_.path(), " && bash -c '", testing::RocksortBinary(), " -l 0 ", in,
      " | head -c 100 > /dev/null; exit ${PIPESTATUS[0]}'"));
  EXPECT_EQ(status.exit_code, 1) << status.stderr_text;
  EXPECT_NE(status.stderr_text.find("stdout"), std::string::npos) << status.stderr_text;
  EXPECT_EQ(dir_.List(), std::vector<std::string>{"in.bam"});
}

}  // namespace
}  // namespace rocksort
