#include "pipeline/pipeline.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace rocksort::pipeline {
namespace {

using ::rocksort::test_util::RunCommand;
using ::rocksort::test_util::ScratchDir;

// A SAM with `n` records at colliding positions on three references plus
// unmapped reads, in scrambled order.
std::string MakeSam(int n) {
  std::string sam =
      "@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:c1\tLN:100000\n@SQ\tSN:c2\tLN:100000\n"
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
    o.inputs = {in};
    o.output = out;
    o.version = "test";
    o.command_line = "rocksort test";
    return o;
  }
  // Sorts with samtools for the expected output.
  std::string SamtoolsSort(const std::string& in) {
    const std::string out = dir_.File("expected.bam");
    const test_util::CommandResult r = RunCommand("samtools sort -o " + out + " " + in);
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    return out;
  }
  ScratchDir dir_;
};

TEST_F(PipelineTest, SortEqualsSamtoolsAndLeavesOnlyTheOutput) {
  const std::string in = dir_.File("in.sam");
  test_util::WriteFileOrDie(in, MakeSam(5000));
  const std::string expected = SamtoolsSort(in);
  SortReport report;
  const absl::Status s = RunSort(Options(in, dir_.File("out.bam")), nullptr, nullptr, {}, &report);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(report.records, 5000u);
  // The loading thread's time, by what it did, falls within the load phase.
  EXPECT_GT(report.read_seconds, 0);
  EXPECT_GT(report.store.write_seconds, 0);
  EXPECT_LE(report.read_seconds + report.store.write_seconds + report.store.merge_wait_seconds,
            report.phase_seconds(Phase::kLoad));
  // The BAM sink measures its waits.
  EXPECT_TRUE(report.emit_waits.has_value());
  EXPECT_EQ(test_util::CompareAlignmentFiles(expected, dir_.File("out.bam")), "");
  EXPECT_EQ(dir_.List(), (std::vector<std::string>{"expected.bam", "in.sam", "out.bam"}));
}

// Compaction off still merges what the final merge cannot hold: at -m 1M
// its memory reads ~90 runs at one block each.
TEST_F(PipelineTest, TinyMemoryFlushesManyRunsAndMergesThemDown) {
  const std::string in = dir_.File("in.sam");
  test_util::WriteFileOrDie(in, MakeSam(300000));
  const std::string expected = SamtoolsSort(in);
  SortOptions o = Options(in, dir_.File("out.bam"));
  o.memory_per_thread = 1 << 20;  // 256 KiB memtables: dozens of runs.
  o.size_hint = 0;                // No background compaction: all merging is MergeDown's.
  o.disk = DiskKind::kHdd;        // Deterministic K, whatever the machine.
  SortReport report;
  const absl::Status s = RunSort(o, nullptr, nullptr, {}, &report);
  ASSERT_TRUE(s.ok()) << s;
  // ~40 MB in 256 KiB memtables, ~210 runs (a flush may take two at once):
  // more runs than one merge may read within the memory budget, so some
  // were merged after loading.
  EXPECT_GT(report.store.intermediate_merges, 0);
  EXPECT_LT(report.store.runs_merged(), report.store.runs_flushed);
  EXPECT_EQ(test_util::CompareAlignmentFiles(expected, dir_.File("out.bam")), "");
}

TEST_F(PipelineTest, SizeHintRunsBackgroundCompactionAndStillMatches) {
  const std::string in = dir_.File("in.sam");
  test_util::WriteFileOrDie(in, MakeSam(150000));
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
  std::map<store::RunCompression, uint64_t> flushed;
  std::map<store::RunCompression, uint64_t> merged;
  for (store::RunCompression c : {store::RunCompression::kLz4, store::RunCompression::kSnappy,
                                  store::RunCompression::kZstd, store::RunCompression::kNone}) {
    o.run_compression = c;
    SortReport report;
    const absl::Status s = RunSort(o, nullptr, nullptr, {}, &report);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(report.store.compaction_mode, "planned");
    EXPECT_GT(report.store.compactions, 0);
    EXPECT_EQ(test_util::CompareAlignmentFiles(expected, dir_.File("out.bam")), "");
    flushed[c] = report.store.flush_bytes;
    merged[c] = report.store.compaction_bytes;
  }
  // Every fresh run is merged while loading, so the fresh runs are written
  // uncompressed whatever was asked (options_plan_internal.h): as many bytes
  // every time (within 1%: the tables' properties name the compression, and
  // where a flush cuts a run varies).
  const double uncompressed = static_cast<double>(flushed[store::RunCompression::kNone]);
  for (const auto& [c, bytes] : flushed) {
    EXPECT_NEAR(static_cast<double>(bytes), uncompressed, uncompressed / 100)
        << "run compression " << static_cast<int>(c);
  }
  // The merged runs carry the compression asked for: zstd's are smaller,
  // uncompressed ones larger.
  EXPECT_LT(merged[store::RunCompression::kZstd], merged[store::RunCompression::kLz4] * 9 / 10);
  EXPECT_GT(merged[store::RunCompression::kNone], merged[store::RunCompression::kLz4] * 11 / 10);
}

// What a progress display reads (tools/progress.cc): the inputs' total size
// is known before loading starts, the bytes read reach it when loading ends
// (a file's "reading" line ends at 100%), and the records and bytes written
// reach what was loaded. Two inputs, SAM text and BGZF-compressed BAM, whose
// bytes consumed are counted differently (loader::Input::bytes_consumed).
TEST_F(PipelineTest, ProgressCountsReachTheInputsSizeAndEveryRecord) {
  const std::string sam = dir_.File("in.sam");
  test_util::WriteFileOrDie(sam, MakeSam(20000));
  const std::string bam = dir_.File("in.bam");
  ASSERT_EQ(RunCommand(absl::StrCat("samtools view -b -o ", bam, " ", sam)).exit_code, 0);
  const uint64_t total = std::filesystem::file_size(sam) + std::filesystem::file_size(bam);

  SortOptions o = Options(sam, dir_.File("out.bam"));
  o.inputs = {sam, bam};
  o.memory_per_thread = 1 << 20;  // Batches of 64 KiB: many progress updates.
  SortProgress progress;
  SortObserver observer;
  observer.progress = &progress;
  std::map<Phase, std::pair<uint64_t, uint64_t>> at_start;  // Phase -> (size, bytes read).
  observer.on_phase = [&](Phase phase) {
    at_start[phase] = {progress.input_size.load(), progress.input_bytes.load()};
  };
  SortReport report;
  const absl::Status s = RunSort(o, nullptr, nullptr, observer, &report);
  ASSERT_TRUE(s.ok()) << s;

  ASSERT_EQ(at_start.count(Phase::kLoad), 1u);
  ASSERT_EQ(at_start.count(Phase::kEmit), 1u);
  EXPECT_EQ(at_start[Phase::kLoad].first, total);
  EXPECT_EQ(at_start[Phase::kLoad].second, 0u);
  EXPECT_EQ(at_start[Phase::kEmit].second, total);
  EXPECT_EQ(progress.records_loaded.load(), 40000u);
  EXPECT_EQ(progress.records_written.load(), 40000u);
  EXPECT_EQ(progress.record_bytes_written.load(), report.record_bytes);
  EXPECT_GT(report.record_bytes, 0u);
}

TEST_F(PipelineTest, CorruptInputLeavesNoOutputAndNoTempData) {
  const std::string in = dir_.File("in.sam");
  test_util::WriteFileOrDie(in, MakeSam(100) + "bad\tline\n");
  const absl::Status s = RunSort(Options(in, dir_.File("out.bam")), nullptr, nullptr, {}, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("in.sam"), std::string::npos) << s;
  EXPECT_NE(s.message().find("record 101"), std::string::npos) << s;
  EXPECT_EQ(dir_.List(), std::vector<std::string>{"in.sam"});
}

TEST_F(PipelineTest, CancellationLeavesNoOutputAndNoTempData) {
  const std::string in = dir_.File("in.sam");
  test_util::WriteFileOrDie(in, MakeSam(1000));
  std::atomic<bool> cancelled{true};
  const absl::Status s =
      RunSort(Options(in, dir_.File("out.bam")), &cancelled, nullptr, {}, nullptr);
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

TEST(PipelineTempDirTest, StreamOutputsPutTempDataUnderTmpdir) {
  ScratchDir dir;
  const char* old_tmpdir = std::getenv("TMPDIR");
  const std::string saved = old_tmpdir != nullptr ? old_tmpdir : "";
  ::setenv("TMPDIR", dir.path().c_str(), 1);
  SortOptions o;
  o.inputs = {"in.bam"};
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

// -v: per phase, each group's CPU time and each thread's share of the
// phase's wall time; threads that ended within the phase (not counted) only
// their time. --stats-json has the same groups.
TEST(SortReportTest, ThreadGroupsShowTheirShareAndEndedThreadsTheirTime) {
  SortReport report;
  PhaseReport load;
  load.phase = Phase::kLoad;
  load.seconds = 10;
  load.threads = {{"rocksort", 1, 5}, {"rs-bgzf", 2, 10}, {"ended threads", 0, 3}};
  report.phases.push_back(load);
  const std::string text = report.ToText();
  EXPECT_TRUE(
      absl::StrContains(text,
                        "rocksort: load: peak RSS so far 0.0 MiB; threads: rocksort 5.0 s (50%), "
                        "rs-bgzf x2 10.0 s (50% each), ended threads 3.0 s\n"))
      << text;
  const std::string json = report.ToJson();
  EXPECT_TRUE(absl::StrContains(
      json, "{\"group\": \"ended threads\", \"threads\": 0, \"cpu_seconds\": 3.000}"))
      << json;
}

// -v and --stats-json: where the loading thread's time went, and the emit
// phase's waits where the sink measured them.
TEST(SortReportTest, LoadAndEmitWaitsAreReported) {
  SortReport report;
  report.read_seconds = 1.5;
  report.store.write_seconds = 2.25;
  report.store.merge_wait_seconds = 0.5;
  std::string text = report.ToText();
  EXPECT_TRUE(
      absl::StrContains(text,
                        "rocksort: loading thread: reading 1.50 s, writing 2.25 s (memtable "
                        "stalls included), waiting for merges 0.50 s\n"))
      << text;
  EXPECT_FALSE(absl::StrContains(text, "compressors waited")) << text;
  std::string json = report.ToJson();
  EXPECT_TRUE(absl::StrContains(json,
                                "\"loader_read_seconds\": 1.500,\n  \"loader_write_seconds\": "
                                "2.250,\n  \"loader_merge_wait_seconds\": 0.500,"))
      << json;
  EXPECT_TRUE(absl::StrContains(
      json, "\"compressors_idle_seconds\": null,\n  \"final_merge_blocked_seconds\": null,"))
      << json;
  report.emit_waits = output::RecordSink::Waits{3.5, 4.25};
  report.store.final_stalled_reads = 12;
  report.store.final_stalled_seconds = 0.75;
  text = report.ToText();
  EXPECT_TRUE(
      absl::StrContains(text,
                        "rocksort: emit: compressors waited 3.50 s for records (summed over "
                        "them), the final merge 4.25 s for the compressors and 0.75 s for the "
                        "disk (12 block reads not prefetched in time)\n"))
      << text;
  json = report.ToJson();
  EXPECT_TRUE(absl::StrContains(
      json,
      "\"compressors_idle_seconds\": 3.500,\n  \"final_merge_blocked_seconds\": 4.250,\n"
      "  \"final_merge_stalled_reads\": 12,\n  \"final_merge_stalled_seconds\": 0.750,"))
      << json;
}

TEST(VerifyIntegrityTest, AnyDifferenceBetweenLoadedAndEmittedIsDataLoss) {
  const RecordTally loaded{10, 4000, 0x1234};
  RecordTally emitted{10, 4000, 0x1234};
  EXPECT_TRUE(VerifyIntegrity(loaded, emitted, "o.bam").ok());
  emitted.checksum = 0x1235;
  const absl::Status s = VerifyIntegrity(loaded, emitted, "o.bam");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("o.bam"), std::string::npos);
  emitted.checksum = loaded.checksum;
  emitted.records = 9;
  EXPECT_FALSE(VerifyIntegrity(loaded, emitted, "o.bam").ok());
}

// SIGINT/SIGTERM set the same flag the guard hands to RunSort; here the flag
// is set as each phase starts, so every phase's unwinding is exercised.
class CancelAtPhaseTest : public ::testing::TestWithParam<Phase> {};

TEST_P(CancelAtPhaseTest, CancellationInEachPhaseLeavesNoOutputAndNoTempData) {
  ScratchDir dir;
  const std::string in = dir.File("in.sam");
  test_util::WriteFileOrDie(in, MakeSam(20000));
  std::atomic<bool> cancelled{false};
  SortOptions o;
  o.inputs = {in};
  o.output = dir.File("out.bam");
  o.memory_per_thread = 1 << 20;  // Many runs, so merging has work to do.
  o.disk = DiskKind::kHdd;
  SortObserver observer;
  observer.on_phase = [&](Phase phase) {
    if (phase == GetParam()) cancelled = true;
  };
  const absl::Status s = RunSort(o, &cancelled, nullptr, observer, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_EQ(dir.List(), std::vector<std::string>{"in.sam"});
}

INSTANTIATE_TEST_SUITE_P(AllPhases, CancelAtPhaseTest,
                         ::testing::Values(Phase::kLoad, Phase::kMerge, Phase::kEmit));

}  // namespace
}  // namespace rocksort::pipeline
