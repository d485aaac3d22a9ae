// End-to-end: the rocksort binary against `samtools sort` on generated
// inputs. "Identical" means the same header apart from @PG and the same
// records in the same order, and also the same decompressed record bytes.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace rocksort {
namespace {

using test_util::CommandResult;
using test_util::RunCommand;
using test_util::ScratchDir;

// The integer after `key` in the statistics JSON, -1 if the key is missing.
int NumberAfter(const std::string& json, const std::string& key) {
  const size_t at = json.find(key);
  int value = -1;
  if (at != std::string::npos) std::sscanf(json.c_str() + at + key.size(), "%d", &value);
  return value;
}

class EndToEndTest : public ::testing::Test {
 protected:
  // Generates an input with gen_reads; `args` are extra generator flags.
  std::string Generate(const std::string& name, const std::string& args) {
    const std::string path = dir_.File(name);
    const CommandResult r =
        RunCommand(absl::StrCat(test_util::GenReadsBinary(), " ", args, " -o ", path));
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
    const CommandResult r = RunCommand(absl::StrCat(test_util::RocksortBinary(), " ", args));
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_EQ(RunCommand("samtools quickcheck " + out).exit_code, 0);
    EXPECT_EQ(test_util::CompareAlignmentFiles(expected, out), "");
    absl::StatusOr<std::string> expected_bytes = test_util::ReadBamRecordBytes(expected);
    absl::StatusOr<std::string> actual_bytes = test_util::ReadBamRecordBytes(out);
    ASSERT_TRUE(expected_bytes.ok() && actual_bytes.ok());
    EXPECT_TRUE(*expected_bytes == *actual_bytes) << "decompressed record bytes differ";
    ExpectNoTempLeftovers();
  }

  // No temporary directory or partial output left in dir_.
  void ExpectNoTempLeftovers() {
    for (const std::string& name : dir_.List()) {
      EXPECT_EQ(name.find("rocksort."), std::string::npos) << "left behind: " << name;
      EXPECT_EQ(name.find(".partial."), std::string::npos) << "left behind: " << name;
    }
  }

  // ExpectSameAsSamtools with `--stats-json` added to `args` (which must name
  // the input last, or redirect stdin); returns the statistics written.
  std::string ExpectSameAsSamtoolsWithStats(const std::string& in, const std::string& args) {
    const std::string stats = dir_.File("stats.json");
    ExpectSameAsSamtools(
        in, absl::StrCat("--stats-json ", stats, " -o ", dir_.File("out.bam"), " ", args));
    return test_util::ReadFileOrDie(stats);
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
  const std::string in = Generate("in.bam", "-n 100000 --seed 11");
  const std::string json = ExpectSameAsSamtoolsWithStats(in, "-@ 2 -m 1M --disk hdd - < " + in);
  EXPECT_NE(json.find("\"compaction_mode\": \"adaptive\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"adaptive_compaction_started\": true"), std::string::npos) << json;
}

// --no-compaction: the final merge reads every flushed run directly (here
// about 30, what -m 1M's final merge reads at once), even where a size hint
// (-s 1G) would have planned merging while loading.
TEST_F(EndToEndTest, NoCompactionReadsEveryRunAtTheEndAndMatchesSamtools) {
  const std::string in = Generate("in.bam", "-n 20000 --seed 12");
  const std::string json =
      ExpectSameAsSamtoolsWithStats(in, "-m 1M -s 1G --no-compaction --disk hdd " + in);
  EXPECT_NE(json.find("\"compaction_mode\": \"off\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"adaptive_compaction_started\": false"), std::string::npos) << json;
  EXPECT_EQ(NumberAfter(json, "\"intermediate_merges\": "), 0) << json;
  EXPECT_NE(json.find("\"write_amplification\": 1.000"), std::string::npos) << json;
  // How many runs the flushes make depends on when they run: 18 to 30 on
  // two busy or idle cores.
  const int flushed = NumberAfter(json, "\"runs_flushed\": ");
  EXPECT_GT(flushed, 10) << json;
  EXPECT_EQ(NumberAfter(json, "\"runs_at_final_merge\": "), flushed) << json;
}

TEST_F(EndToEndTest, TwoLanesMergedDownInParallelMatchSamtools) {
  // -@ 2: runs alternate between two column families, each merged down by
  // its own thread after loading, and the emitter merges the two. A size
  // hint far below the data (-s 1K) plans no merging while loading, so
  // every run is merged after it.
  const std::string in = Generate("in.bam", "-n 100000 --seed 14 --tie-frac 0.3");
  const std::string json = ExpectSameAsSamtoolsWithStats(in, "-@ 2 -m 1M -s 1K --disk hdd " + in);
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
// A size hint far below the data (-s 1K) plans no merging while loading.
TEST_F(EndToEndTest, IntermediateMergesCountInWriteAmplification) {
  const std::string in = Generate("in.bam", "-n 40000 --seed 13");
  const std::string json = ExpectSameAsSamtoolsWithStats(in, "-m 1M -s 1K --disk hdd " + in);
  ASSERT_EQ(json.find("\"intermediate_merges\": 0,"), std::string::npos) << json;
  EXPECT_EQ(json.find("\"compactions\": 0,"), std::string::npos) << json;
  EXPECT_EQ(json.find("\"write_amplification\": 1.000"), std::string::npos) << json;
  EXPECT_EQ(json.find("\"intermediate_merge_bytes\": 0,"), std::string::npos) << json;
  // Every run flushed is still there when loading ends, and the merges
  // after loading take them down to what the final merge reads.
  const int flushed = NumberAfter(json, "\"runs_flushed\": ");
  EXPECT_GT(flushed, 0) << json;
  EXPECT_EQ(NumberAfter(json, "\"runs_after_load_per_lane\": ["), flushed) << json;
  EXPECT_LT(NumberAfter(json, "\"runs_at_final_merge\": "), flushed) << json;
}

TEST_F(EndToEndTest, ZeroRecordsGiveAValidEmptyBam) {
  const std::string in = dir_.File("empty.sam");
  test_util::WriteFileOrDie(in, "@HD\tVN:1.6\n@SQ\tSN:chr1\tLN:1000\n");
  ExpectSameAsSamtools(in, absl::StrCat(in, " ", dir_.File("out.bam")));
}

TEST_F(EndToEndTest, UnmappedOnlyInputKeepsInputOrder) {
  std::string sam = "@HD\tVN:1.6\n@SQ\tSN:chr1\tLN:1000\n";
  for (int i = 0; i < 3000; ++i) {
    absl::StrAppend(&sam, "u", (i * 7919) % 3000, "\t4\t*\t0\t0\t*\t*\t0\t0\tACGTN\tIIIII\n");
  }
  const std::string in = dir_.File("unmapped.sam");
  test_util::WriteFileOrDie(in, sam);
  ExpectSameAsSamtools(in, absl::StrCat("-m 1M ", in, " ", dir_.File("out.bam")));
}

// POS 2147483648 (0-based 2^31 - 1) is past the spec's limit, but htslib
// reads it and samtools sorts it last within its reference, both strands
// and input order kept.
TEST_F(EndToEndTest, LargestBamPositionMatchesSamtools) {
  std::string sam = "@HD\tVN:1.6\n@SQ\tSN:c1\tLN:2147483647\n@SQ\tSN:c2\tLN:100\n";
  for (int i = 0; i < 8; ++i) {
    const char* pos = i % 2 == 0 ? "2147483648" : "2147483647";
    absl::StrAppend(&sam, "r", i, "\t", i % 3 == 0 ? 16 : 0, "\tc1\t", pos,
                    "\t60\t1M\t*\t0\t0\tA\tI\n");
  }
  absl::StrAppend(&sam, "s\t0\tc2\t1\t60\t1M\t*\t0\t0\tA\tI\n");
  const std::string in = dir_.File("largest.sam");
  test_util::WriteFileOrDie(in, sam);
  ExpectSameAsSamtools(in, absl::StrCat(in, " ", dir_.File("out.bam")));
}

TEST_F(EndToEndTest, HeaderWithoutHdGetsSortOrder) {
  const std::string in = dir_.File("nohd.sam");
  test_util::WriteFileOrDie(in,
                            "@SQ\tSN:chr1\tLN:1000\n"
                            "b\t0\tchr1\t20\t60\t2M\t*\t0\t0\tAC\tII\n"
                            "a\t0\tchr1\t10\t60\t2M\t*\t0\t0\tAC\tII\n");
  ExpectSameAsSamtools(in, absl::StrCat(in, " ", dir_.File("out.bam")));
  absl::StatusOr<test_util::AlignmentFile> out = test_util::ReadAlignmentFile(dir_.File("out.bam"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->header_without_pg.rfind("@HD\tVN:", 0), 0u) << out->header_without_pg;
  EXPECT_NE(out->header_without_pg.find("SO:coordinate"), std::string::npos);
}

// samtools sort drops @HD GO (grouping) and SS (sub-sort order), which no
// longer hold after a coordinate sort, and leaves the other @HD tags where
// they are.
TEST_F(EndToEndTest, HdGroupingAndSubSortAreDroppedLikeSamtools) {
  for (const std::string hd :
       {"@HD\tVN:1.6\tSO:queryname\tGO:query\tSS:queryname:natural", "@HD\tVN:1.6\tGO:reference",
        "@HD\tVN:1.6\tXX:y\tSO:unsorted\tGO:none\tZZ:q"}) {
    SCOPED_TRACE(hd);
    const std::string in = dir_.File("hd.sam");
    test_util::WriteFileOrDie(in, absl::StrCat(hd,
                                               "\n@SQ\tSN:chr1\tLN:1000\n"
                                               "b\t0\tchr1\t20\t60\t2M\t*\t0\t0\tAC\tII\n"
                                               "a\t0\tchr1\t10\t60\t2M\t*\t0\t0\tAC\tII\n"));
    ExpectSameAsSamtools(in, absl::StrCat(in, " ", dir_.File("out.bam")));
  }
}

TEST_F(EndToEndTest, PgLineRecordsTheCommandUnlessDisabled) {
  const std::string in = Generate("in.bam", "-n 100 --seed 8");
  const std::string out = dir_.File("out.bam");
  ASSERT_EQ(RunCommand(absl::StrCat(test_util::RocksortBinary(), " ", in, " ", out)).exit_code, 0);
  CommandResult h = RunCommand("samtools view -H " + out);
  EXPECT_NE(h.stdout_text.find("@PG\tID:rocksort"), std::string::npos) << h.stdout_text;
  ASSERT_EQ(
      RunCommand(absl::StrCat(test_util::RocksortBinary(), " --no-PG ", in, " ", out)).exit_code,
      0);
  h = RunCommand("samtools view --no-PG -H " + out);
  EXPECT_EQ(h.stdout_text.find("ID:rocksort"), std::string::npos) << h.stdout_text;
}

TEST_F(EndToEndTest, CorruptInputFailsWithoutOutputOrTempData) {
  const std::string in = Generate("in.bam", "-n 20000 --seed 9");
  const std::string truncated = dir_.File("trunc.bam");
  const std::string bytes = test_util::ReadFileOrDie(in);
  test_util::WriteFileOrDie(truncated, bytes.substr(0, bytes.size() / 2));
  const CommandResult r = RunCommand(
      absl::StrCat(test_util::RocksortBinary(), " -o ", dir_.File("out.bam"), " ", truncated));
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
        fifo, " & feeder=$!; ", test_util::RocksortBinary(), " -o ", dir_.File("out.bam"), " - < ",
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
  const CommandResult status =
      RunCommand(absl::StrCat("cd ", dir_.path(), " && bash -c '", test_util::RocksortBinary(),
                              " -l 0 ", in, " | head -c 100 > /dev/null; exit ${PIPESTATUS[0]}'"));
  EXPECT_EQ(status.exit_code, 1) << status.stderr_text;
  EXPECT_NE(status.stderr_text.find("stdout"), std::string::npos) << status.stderr_text;
  EXPECT_EQ(dir_.List(), std::vector<std::string>{"in.bam"});
}

// samtools' long spellings work the same here: --threads, -O bam.
TEST_F(EndToEndTest, SamtoolsOptionSpellingsMatchSamtools) {
  const std::string in = Generate("in.bam", "-n 5000 --seed 13");
  ExpectSameAsSamtools(in, absl::StrCat("--threads 2 -O bam -o ", dir_.File("out.bam"), " ", in));
}

// `-o /dev/stdout` with stdout redirected to a file: the output becomes that
// file, and nothing (partial output, temporary DB) is created in /dev, nor is
// the /dev/stdout link replaced.
TEST_F(EndToEndTest, DevStdoutRedirectedToAFileMatchesSamtools) {
  struct stat st;
  if (::lstat("/dev/stdout", &st) != 0 || !S_ISLNK(st.st_mode)) {
    GTEST_SKIP() << "/dev/stdout is not a symlink here";
  }
  const std::string in = Generate("in.bam", "-n 5000 --seed 14");
  ExpectSameAsSamtools(in, absl::StrCat("-o /dev/stdout ", in, " > ", dir_.File("out.bam")));
  ASSERT_EQ(::lstat("/dev/stdout", &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  for (const auto& entry : std::filesystem::directory_iterator("/dev")) {
    EXPECT_FALSE(absl::StartsWith(entry.path().filename().string(), "stdout."))
        << "left in /dev: " << entry.path();
  }
}

// SAM compressed with plain gzip (not BGZF) has no BGZF end-of-file marker
// and must not be reported as possibly truncated.
TEST_F(EndToEndTest, PlainGzipSamMatchesSamtoolsWithoutATruncationWarning) {
  const std::string sam = Generate("in.sam", "-n 5000 --seed 15");
  ASSERT_EQ(RunCommand("gzip " + sam).exit_code, 0);
  const std::string in = sam + ".gz";
  ExpectSameAsSamtools(in, absl::StrCat("-@ 2 -o ", dir_.File("out.bam"), " ", in));
  const CommandResult r =
      RunCommand(absl::StrCat(test_util::RocksortBinary(), " -o ", dir_.File("out2.bam"), " ", in));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stderr_text, "");
}

// CRAM input decoded with --reference, like `samtools sort --reference`. The
// reference is renamed after writing the CRAM and htslib's own lookups are
// pointed at nothing, so only --reference can decode it.
TEST_F(EndToEndTest, CramWithReferenceMatchesSamtools) {
  const std::string sam = Generate("in.sam", "-n 3000 --seed 16 --refs 3 --genome-length 30K");
  const std::string fasta = test_util::FastaForHeader(test_util::ReadFileOrDie(sam));
  const std::string written_with = dir_.File("ref_at_write.fa");
  test_util::WriteFileOrDie(written_with, fasta);
  const std::string cram = dir_.File("in.cram");
  ASSERT_EQ(RunCommand(absl::StrCat("samtools view -C -T ", written_with, " -o ", cram, " ", sam))
                .exit_code,
            0);
  const std::string ref = dir_.File("ref.fa");
  ASSERT_EQ(::rename(written_with.c_str(), ref.c_str()), 0);
  ::unlink((written_with + ".fai").c_str());
  const std::string env = test_util::NoReferenceLookupEnv(dir_);
  const std::string expected = dir_.File("expected.bam");
  const CommandResult s =
      RunCommand(absl::StrCat(env, "samtools sort --reference ", ref, " -o ", expected, " ", cram));
  ASSERT_EQ(s.exit_code, 0) << s.stderr_text;
  const std::string out = dir_.File("out.bam");
  const CommandResult r = RunCommand(absl::StrCat(
      env, test_util::RocksortBinary(), " -@ 2 --reference ", ref, " -o ", out, " ", cram));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(test_util::CompareAlignmentFiles(expected, out), "");
  absl::StatusOr<std::string> expected_bytes = test_util::ReadBamRecordBytes(expected);
  absl::StatusOr<std::string> actual_bytes = test_util::ReadBamRecordBytes(out);
  ASSERT_TRUE(expected_bytes.ok() && actual_bytes.ok());
  EXPECT_TRUE(*expected_bytes == *actual_bytes) << "decompressed record bytes differ";

  // Without it the CRAM can't be decoded: a clean failure naming the input.
  // With a reference that does not exist: a failure naming that file.
  ::unlink(out.c_str());
  const CommandResult none =
      RunCommand(absl::StrCat(env, test_util::RocksortBinary(), " -o ", out, " ", cram));
  EXPECT_EQ(none.exit_code, 1) << none.stderr_text;
  EXPECT_TRUE(absl::StrContains(none.stderr_text, cram)) << none.stderr_text;
  EXPECT_TRUE(absl::StrContains(none.stderr_text, "reference")) << none.stderr_text;
  const std::string missing = dir_.File("missing.fa");
  const CommandResult bad = RunCommand(absl::StrCat(
      env, test_util::RocksortBinary(), " --reference ", missing, " -o ", out, " ", cram));
  EXPECT_EQ(bad.exit_code, 1) << bad.stderr_text;
  EXPECT_TRUE(absl::StrContains(bad.stderr_text, missing)) << bad.stderr_text;
  EXPECT_FALSE(std::filesystem::exists(out));
}

// SAM text without @SQ lines takes its references from --reference: the
// FASTA index as samtools reads it, and also the FASTA itself when it has
// an index beside it (htslib alone would parse the FASTA as an index and
// fail at the first record).
TEST_F(EndToEndTest, SamWithoutSqTakesReferencesFromTheFastaIndex) {
  const std::string ref = dir_.File("ref.fa");
  test_util::WriteFileOrDie(ref, ">c\nACGTACGTAC\n>d\nACGT\n");
  ASSERT_EQ(RunCommand("samtools faidx " + ref).exit_code, 0);
  const std::string in = dir_.File("no_sq.sam");
  test_util::WriteFileOrDie(in,
                            "r1\t0\td\t2\t0\t1M\t*\t0\t0\tA\tI\n"
                            "r2\t16\tc\t9\t0\t2M\t*\t0\t0\tAC\tII\n"
                            "r3\t0\tc\t1\t0\t1M\t*\t0\t0\tA\tI\n");
  const std::string expected = dir_.File("expected.bam");
  const CommandResult s =
      RunCommand(absl::StrCat("samtools sort --reference ", ref, ".fai -o ", expected, " ", in));
  ASSERT_EQ(s.exit_code, 0) << s.stderr_text;
  const std::string out = dir_.File("out.bam");
  for (const std::string& given : {ref + ".fai", ref}) {
    SCOPED_TRACE(given);
    const CommandResult r = RunCommand(
        absl::StrCat(test_util::RocksortBinary(), " --reference ", given, " -o ", out, " ", in));
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_EQ(test_util::CompareAlignmentFiles(expected, out), "");
    EXPECT_TRUE(
        absl::StrContains(RunCommand("samtools view -H " + out).stdout_text, "@SQ\tSN:d\tLN:4"));
  }
}

// Far more runs than open files allowed (-m 1M without compaction flushes
// hundreds of runs; the limit is 128): RocksDB's table cache closes and
// reopens them, and the merges read no more at once than the limit allows.
// Before, this failed with "Too many open files" while loading.
TEST_F(EndToEndTest, MoreRunsThanOpenFilesMatchSamtools) {
  // About 200 runs of 480 KiB at -m 1M, well above the 128 open files.
  const std::string in = Generate("in.bam", "-n 150000 --seed 17");
  const std::string expected = SamtoolsSort(in);
  const std::string out = dir_.File("out.bam");
  const std::string stats = dir_.File("stats.json");
  const CommandResult r = RunCommand(absl::StrCat("ulimit -n 128 && ", test_util::RocksortBinary(),
                                                  " -m 1M --no-compaction ", "--stats-json ", stats,
                                                  " -o ", out, " ", in));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(test_util::CompareAlignmentFiles(expected, out), "");
  const std::string json = test_util::ReadFileOrDie(stats);
  EXPECT_GT(NumberAfter(json, "\"runs_flushed\": "), 128) << json;
}

// --write-index writes the index `samtools index` makes of the same output,
// byte for byte: CSI at OUT.csi by default, BAI for OUT##idx##X.bai.
// The edge-case input has records longer than a block, unmapped reads with
// and without a position, and reads at the last base.
TEST_F(EndToEndTest, WriteIndexIsTheIndexSamtoolsMakes) {
  const std::string in = Generate("in.bam", "-n 3000 --seed 18 --edge-cases");
  const std::string out = dir_.File("out.bam");
  for (const std::string threads : {"-@ 1", "-@ 3"}) {
    SCOPED_TRACE(threads);
    ExpectSameAsSamtools(in, absl::StrCat(threads, " -m 2M --write-index -o ", out, " ", in));
    ASSERT_EQ(
        RunCommand(absl::StrCat("samtools index -c ", out, " ", dir_.File("ref.csi"))).exit_code,
        0);
    EXPECT_TRUE(test_util::ReadFileOrDie(out + ".csi") ==
                test_util::ReadFileOrDie(dir_.File("ref.csi")))
        << "CSI differs from samtools index -c";

    const std::string bai = dir_.File("named.bai");
    ExpectSameAsSamtools(in,
                         absl::StrCat(threads, " --write-index -o ", out, "##idx##", bai, " ", in));
    ASSERT_EQ(
        RunCommand(absl::StrCat("samtools index -b ", out, " ", dir_.File("ref.bai"))).exit_code,
        0);
    EXPECT_TRUE(test_util::ReadFileOrDie(bai) == test_util::ReadFileOrDie(dir_.File("ref.bai")))
        << "BAI differs from samtools index -b";
    // The index works: a region query returns what samtools finds with its own.
    const CommandResult mine =
        RunCommand(absl::StrCat("samtools view -c -X ", out, " ", bai, " chr1:1-5000000"));
    const CommandResult theirs = RunCommand(
        absl::StrCat("samtools view -c -X ", out, " ", dir_.File("ref.bai"), " chr1:1-5000000"));
    EXPECT_EQ(mine.exit_code, 0) << mine.stderr_text;
    EXPECT_EQ(mine.stdout_text, theirs.stdout_text);
    for (const std::string& f : {out + ".csi", bai, dir_.File("ref.csi"), dir_.File("ref.bai")}) {
      ::unlink(f.c_str());
    }
  }
}

// Names up to the file system's limit work, as with samtools: the temporary
// names made beside OUT (OUT.rocksort.XXXXXX, OUT.partial.XXXXXX,
// OUT.csi.partial.XXXXXX) are shortened to fit instead of failing.
TEST_F(EndToEndTest, OutputNamedUpToTheFileSystemLimitIsWritten) {
  if (::pathconf(dir_.path().c_str(), _PC_NAME_MAX) != 255) GTEST_SKIP() << "NAME_MAX is not 255";
  const std::string in = Generate("in.bam", "-n 2000 --seed 20");
  const std::string expected = SamtoolsSort(in);
  // 251 bytes, and 255 with the index's ".csi".
  const std::string out = dir_.File(std::string(247, 'a') + ".bam");
  const CommandResult r = RunCommand(
      absl::StrCat(test_util::RocksortBinary(), " -m 1M --write-index -o ", out, " ", in));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(test_util::CompareAlignmentFiles(expected, out), "");
  EXPECT_EQ(RunCommand("samtools view -c " + out + " chr1").exit_code, 0);
  ExpectNoTempLeftovers();
  EXPECT_EQ(::access((out + ".csi").c_str(), F_OK), 0);
}

// `-o IN IN` sorts the file in place, as samtools does: the input is read
// to its end before the verified output replaces it.
TEST_F(EndToEndTest, OutputMayBeTheInputFile) {
  const std::string in = Generate("in.bam", "-n 3000 --seed 21");
  const std::string expected = SamtoolsSort(in);
  const CommandResult r =
      RunCommand(absl::StrCat(test_util::RocksortBinary(), " -m 1M -o ", in, " ", in));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(test_util::CompareAlignmentFiles(expected, in), "");
  ExpectNoTempLeftovers();
}

TEST_F(EndToEndTest, WriteIndexToStdoutIsRefused) {
  const std::string in = Generate("in.bam", "-n 100 --seed 19");
  const CommandResult r =
      RunCommand(absl::StrCat(test_util::RocksortBinary(), " --write-index ", in, " > /dev/null"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "--write-index")) << r.stderr_text;
}

}  // namespace
}  // namespace rocksort
