// Every sort order through the rocksort binary:
//   * the golden outputs of samtools 1.23.1 (test/data/oracle/, and
//     test/data/minimiser/ for -M): each input
//     in each mode, from a file and from stdin, as SAM, BAM and CRAM, must
//     give the expected header (without @PG) and the expected records, in
//     order; where samtools refuses the input (template-coordinate without
//     MC tags) rocksort must fail the same way, leaving nothing behind;
//   * Debian's samtools 1.16 as a live oracle where the two versions agree
//     (-t and --template-coordinate; -n on names without leading-zero ties
//     and without secondary or supplementary records), on generated inputs
//     with edge cases, at -m 1M -@ 2 (many runs and merges);
//   * the output of every order does not depend on -m or -@.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace rocksort {
namespace {

namespace fs = std::filesystem;
using test_util::CommandResult;
using test_util::RunCommand;
using test_util::ScratchDir;

const std::string kOracle = std::string(ROCKSORT_TEST_DATA) + "/oracle";
const std::string kMinimiserOracle = std::string(ROCKSORT_TEST_DATA) + "/minimiser";

struct Mode {
  const char* name;   // As in the oracle's file names.
  const char* flags;  // samtools sort's (and rocksort's) flags for it.
};

const Mode kModes[] = {
    {"coord", ""},        {"n", "-n"},
    {"N", "-N"},          {"tRG", "-t RG"},
    {"tAS", "-t AS"},     {"tXT", "-t XT"},
    {"tXA", "-t XA"},     {"tRGn", "-t RG -n"},
    {"tASN", "-t AS -N"}, {"template", "--template-coordinate"},
};

// test/data/minimiser/README.md's modes.
const Mode kMinimiserModes[] = {
    {"M", "-M"},        {"MR", "-M -R"},    {"MH", "-M -H"},      {"MHR", "-M -H -R"},
    {"MK1", "-M -K 1"}, {"MK5", "-M -K 5"}, {"MK31", "-M -K 31"}, {"MK31R", "-M -K 31 -R"},
};

// SAM text without @PG lines: what the oracle stores.
std::string WithoutPg(const std::string& sam) {
  std::vector<std::string> kept;
  for (absl::string_view line : absl::StrSplit(sam, '\n', absl::SkipEmpty())) {
    if (!absl::StartsWith(line, "@PG\t")) kept.emplace_back(line);
  }
  return absl::StrJoin(kept, "\n") + "\n";
}

// `path` (BAM, SAM or SAM.gz) as SAM text without @PG lines.
std::string SamText(const std::string& path) {
  const CommandResult r = RunCommand("samtools view --no-PG -h " + path);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  return WithoutPg(r.stdout_text);
}

struct GoldenCase {
  std::string dir;    // kOracle or kMinimiserOracle.
  std::string input;  // File name under inputs/.
  std::string stem;   // Without .sam / .sam.gz.
  Mode mode;
};

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.input << " " << c.mode.name; }

template <size_t N>
std::vector<GoldenCase> CasesIn(const std::string& dir, const Mode (&modes)[N]) {
  std::vector<std::string> inputs;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir + "/inputs", ec)) {
    inputs.push_back(e.path().filename().string());
  }
  std::sort(inputs.begin(), inputs.end());
  std::vector<GoldenCase> cases;
  for (const std::string& input : inputs) {
    for (const Mode& mode : modes) {
      cases.push_back({dir, input, input.substr(0, input.find(".sam")), mode});
    }
  }
  return cases;
}

std::vector<GoldenCase> AllCases() { return CasesIn(kOracle, kModes); }

class GoldenOrderTest : public ::testing::TestWithParam<GoldenCase> {
 protected:
  std::string Expected(const std::string& suffix) const {
    return absl::StrCat(GetParam().dir, "/expected/", GetParam().stem, ".", GetParam().mode.name,
                        suffix);
  }

  // Runs `rocksort FLAGS ARGS` writing out.bam and checks it against the
  // oracle: the same SAM text, or the same refusal. `through_cram`: the
  // input went through CRAM, which moves RG tags last; so does the
  // expected output then.
  void Check(const std::string& args, bool through_cram = false) {
    const std::string out = dir_.File("out.bam");
    const CommandResult r = RunCommand(absl::StrCat(test_util::RocksortBinary(), " ",
                                                    GetParam().mode.flags, " -o ", out, " ", args));
    if (fs::exists(Expected(".error"))) {
      EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
      EXPECT_TRUE(absl::StrContains(r.stderr_text, "MC")) << r.stderr_text;
      EXPECT_TRUE(absl::StrContains(r.stderr_text, "samtools fixmate")) << r.stderr_text;
      EXPECT_TRUE(absl::StrContains(r.stderr_text, "record ")) << r.stderr_text;
      EXPECT_FALSE(fs::exists(out));
    } else {
      ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
      const std::string expected =
          fs::exists(Expected(".sam")) ? Expected(".sam") : Expected(".sam.gz");
      // SamText of the expected file too: the same htslib prints both.
      EXPECT_EQ(SamText(out), SamText(through_cram ? ToCram(expected) : expected));
    }
    for (const std::string& name : dir_.List()) {
      EXPECT_FALSE(absl::StrContains(name, "rocksort.") || absl::StrContains(name, ".partial."))
          << "left behind: " << name;
    }
  }

  std::string Input() const { return absl::StrCat(GetParam().dir, "/inputs/", GetParam().input); }

  // `sam` as CRAM without a reference (no sequence is stored against one),
  // as samtools writes it with no_ref; REF_PATH points nowhere so that
  // htslib never looks a reference up on the network.
  std::string ToCram(const std::string& sam) {
    const std::string cram = dir_.File(absl::StrCat("c", crams_++, ".cram"));
    const CommandResult r =
        RunCommand(absl::StrCat("REF_PATH=", dir_.File("none/%s"), " samtools view --no-PG -C ",
                                "--output-fmt-option no_ref=1 -o ", cram, " ", sam));
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    return cram;
  }
  int crams_ = 0;

  ScratchDir dir_;
};

TEST_P(GoldenOrderTest, FileInputMatchesSamtools) { Check(Input()); }

// The other input paths on a few inputs (the keys are the same; reading is
// what differs): SAM text on stdin, BAM with decode threads and many runs,
// CRAM.
class GoldenInputsTest : public GoldenOrderTest {};

TEST_P(GoldenInputsTest, SamOnStdinMatchesSamtools) { Check(absl::StrCat("- < ", Input())); }

TEST_P(GoldenInputsTest, BamInputWithThreadsAndManyRunsMatchesSamtools) {
  const std::string bam = dir_.File("in.bam");
  ASSERT_EQ(RunCommand(absl::StrCat("samtools view --no-PG -b -o ", bam, " ", Input())).exit_code,
            0);
  Check(absl::StrCat("-@ 2 -m 1M ", bam));
}

TEST_P(GoldenInputsTest, CramInputMatchesSamtools) {
  Check(ToCram(Input()), /*through_cram=*/true);
}

std::string CaseName(const ::testing::TestParamInfo<GoldenCase>& info) {
  std::string name = info.param.stem + "_" + info.param.mode.name;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

std::vector<GoldenCase> CasesOf(const std::vector<std::string>& stems, bool include) {
  std::vector<GoldenCase> cases;
  for (const GoldenCase& c : AllCases()) {
    if ((std::find(stems.begin(), stems.end(), c.stem) != stems.end()) == include) {
      cases.push_back(c);
    }
  }
  return cases;
}

// "Ties" (the seeded corpus stressing every tie-break) also runs under the
// sanitizers; the rest of the oracle only in the normal suite.
INSTANTIATE_TEST_SUITE_P(Ties, GoldenOrderTest, ::testing::ValuesIn(CasesOf({"ties"}, true)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Oracle, GoldenOrderTest, ::testing::ValuesIn(CasesOf({"ties"}, false)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Ties, GoldenInputsTest, ::testing::ValuesIn(CasesOf({"ties"}, true)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Oracle, GoldenInputsTest,
                         ::testing::ValuesIn(CasesOf({"aligner_slice", "template_mi"}, true)),
                         CaseName);
// -M rewrites unplaced reads as it loads them: through every input path.
INSTANTIATE_TEST_SUITE_P(Minimiser, GoldenInputsTest,
                         ::testing::ValuesIn(CasesIn(kMinimiserOracle, kMinimiserModes)), CaseName);

// Generated inputs, larger, with every edge case gen_reads makes.
class LiveOrderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    input_ = dir_.File("in.bam");
    const CommandResult r = RunCommand(absl::StrCat(
        test_util::GenReadsBinary(), " -n 8000 --seed 31 --tie-frac 0.2 --edge-cases -o ", input_));
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  }

  // rocksort with `flags` and `args`, then its output as SAM text.
  std::string Rocksort(const std::string& flags, const std::string& args, const std::string& in) {
    const std::string out = dir_.File("out.bam");
    const CommandResult r = RunCommand(
        absl::StrCat(test_util::RocksortBinary(), " ", flags, " ", args, " -o ", out, " ", in));
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    return SamText(out);
  }

  std::string Samtools(const std::string& flags, const std::string& in) {
    const std::string out = dir_.File("expected.bam");
    const CommandResult r = RunCommand(absl::StrCat("samtools sort ", flags, " -o ", out, " ", in));
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    return SamText(out);
  }

  ScratchDir dir_;
  std::string input_;
};

// Where Debian's samtools 1.16 sorts as 1.23.1 does (SORT_ORDERS.md): tag
// orders and template-coordinate; the header differs for -t (1.16 writes
// SO:unknown), so only records are compared there.
TEST_F(LiveOrderTest, TagAndTemplateOrdersMatchSamtoolsWithManyRuns) {
  for (const char* flags :
       {"-t RG", "-t AS", "-t NM", "-t MD", "-t XS -n", "-t NM -n", "--template-coordinate"}) {
    SCOPED_TRACE(flags);
    const std::string expected = Samtools(flags, input_);
    const std::string actual = Rocksort(flags, "-@ 2 -m 1M", input_);
    auto records = [](const std::string& sam) {
      std::vector<std::string> lines;
      for (absl::string_view line : absl::StrSplit(sam, '\n', absl::SkipEmpty())) {
        if (!absl::StartsWith(line, "@")) lines.emplace_back(line);
      }
      return lines;
    };
    const std::vector<std::string> want = records(expected);
    const std::vector<std::string> got = records(actual);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(want[i], got[i]) << "first difference at record " << i + 1;
    }
    if (absl::StrContains(flags, "template")) {
      EXPECT_EQ(actual, expected);  // The headers agree too.
    }
  }
}

// 1.16 breaks -n ties by READ1/READ2 only, 1.23.1 also by secondary and
// supplementary: without such records the two agree.
TEST_F(LiveOrderTest, NameOrderMatchesSamtoolsWithManyRuns) {
  const std::string primary = dir_.File("primary.bam");
  ASSERT_EQ(RunCommand(absl::StrCat("samtools view --no-PG -b -F 0x900 -o ", primary, " ", input_))
                .exit_code,
            0);
  const std::string expected = Samtools("-n", primary);
  const std::string actual = Rocksort("-n", "-@ 2 -m 1M", primary);
  // 1.16 writes no SS tag: compare the records and the rest of the header.
  auto without_ss = [](std::string sam) {
    const size_t ss = sam.find("\tSS:queryname:natural");
    if (ss != std::string::npos) sam.erase(ss, std::strlen("\tSS:queryname:natural"));
    return sam;
  };
  EXPECT_EQ(without_ss(actual), expected);
}

// Records, and so runs and merges, must never change the order.
TEST_F(LiveOrderTest, NoOrderDependsOnMemoryOrThreads) {
  std::vector<Mode> modes(std::begin(kModes), std::end(kModes));
  modes.push_back({"M", "-M"});
  modes.push_back({"MHK9", "-M -H -K 9"});
  for (const Mode& mode : modes) {
    SCOPED_TRACE(mode.name);
    const std::string one_run = Rocksort(mode.flags, "-m 1G", input_);
    EXPECT_EQ(Rocksort(mode.flags, "-@ 3 -m 1M -s 400M", input_), one_run);
  }
}

TEST_F(LiveOrderTest, EmptyInputGetsTheOrdersHeader) {
  const std::string empty = dir_.File("empty.sam");
  test_util::WriteFileOrDie(empty, "@HD\tVN:1.6\tSO:coordinate\n@SQ\tSN:c1\tLN:100\n");
  EXPECT_EQ(Rocksort("-n", "", empty),
            "@HD\tVN:1.6\tSO:queryname\tSS:queryname:natural\n@SQ\tSN:c1\tLN:100\n");
  EXPECT_EQ(Rocksort("--template-coordinate", "", empty),
            "@HD\tVN:1.6\tSO:unsorted\tGO:query\tSS:unsorted:template-coordinate\n"
            "@SQ\tSN:c1\tLN:100\n");
  // No read is placed: samtools 1.23.1 calls that unsorted.
  EXPECT_EQ(Rocksort("-M", "", empty),
            "@HD\tVN:1.6\tSO:unsorted\tSS:unsorted:minhash\n@SQ\tSN:c1\tLN:100\n");
}

// samtools writes an index for -M: its placed reads are in coordinate order
// and the unplaced ones, at the end, have no position.
TEST_F(LiveOrderTest, MinimiserOrderWritesAUsableIndex) {
  const std::string out = dir_.File("out.bam");
  const CommandResult r = RunCommand(
      absl::StrCat(test_util::RocksortBinary(), " -M -m 1M --write-index -o ", out, " ", input_));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_FALSE(absl::StrContains(r.stderr_text, "warning")) << r.stderr_text;
  ASSERT_TRUE(fs::exists(out + ".csi"));
  // Every reference's count through the index equals a scan's.
  const CommandResult stats = RunCommand("samtools idxstats " + out);
  ASSERT_EQ(stats.exit_code, 0) << stats.stderr_text;
  const CommandResult scan = RunCommand(
      "samtools view " + out + " | awk '{n[$3]++} END {for (r in n) print r, n[r]}' | sort");
  const CommandResult indexed =
      RunCommand("samtools idxstats " + out + " | awk '$3 + $4 > 0 {print $1, $3 + $4}' | sort");
  EXPECT_EQ(indexed.stdout_text, scan.stdout_text);
  // A region query reads through the index.
  const CommandResult first = RunCommand("samtools view " + out + " | head -1 | cut -f 3");
  ASSERT_NE(first.stdout_text, "*\n");
  const CommandResult region = RunCommand(absl::StrCat(
      "samtools view -c ", out, " ", absl::StripTrailingAsciiWhitespace(first.stdout_text)));
  EXPECT_EQ(region.exit_code, 0) << region.stderr_text;
  EXPECT_NE(region.stdout_text, "0\n");
}

TEST_F(LiveOrderTest, WriteIndexIsIgnoredWithAWarningForOtherOrders) {
  const std::string out = dir_.File("out.bam");
  const CommandResult r = RunCommand(
      absl::StrCat(test_util::RocksortBinary(), " -n --write-index -o ", out, " ", input_));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "warning: ignoring --write-index")) << r.stderr_text;
  EXPECT_FALSE(fs::exists(out + ".csi"));
}

}  // namespace
}  // namespace rocksort
