// End-to-end: samtools' global options that reach htslib, through the
// rocksort binary, against Debian's `samtools sort` given the same options:
// --input-fmt-option (a filter= on SAM text, required_fields= on CRAM) and
// --verbosity (htslib's warning about a BAM without its EOF block).
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace rocksort {
namespace {

using test_util::CommandResult;
using test_util::RunCommand;
using test_util::ScratchDir;

class HtslibOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sam_ = dir_.File("in.sam");
    const CommandResult r =
        RunCommand(absl::StrCat(test_util::GenReadsBinary(), " -n 400 --seed 11 --refs 3 -o ", sam_));
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  }

  // Sorts `input` to SAM text with `options`, by samtools and by rocksort,
  // and returns both outputs (without @PG: --no-PG).
  std::pair<std::string, std::string> SortBoth(const std::string& options,
                                               const std::string& input) {
    const std::string expected = dir_.File("expected.sam");
    const std::string actual = dir_.File("actual.sam");
    CommandResult r = RunCommand(
        absl::StrCat("samtools sort --no-PG -O sam ", options, " -o ", expected, " ", input));
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    r = RunCommand(absl::StrCat(test_util::RocksortBinary(), " --no-PG -O sam ", options, " -o ",
                                actual, " ", input));
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    return {test_util::ReadFileOrDie(expected), test_util::ReadFileOrDie(actual)};
  }

  static size_t Records(const std::string& sam) {
    size_t n = 0;
    for (absl::string_view line : absl::StrSplit(sam, '\n', absl::SkipEmpty())) {
      if (line[0] != '@') ++n;
    }
    return n;
  }

  ScratchDir dir_;
  std::string sam_;
};

// htslib's filter expressions apply to any input: the records it rejects
// are never read, as in samtools.
TEST_F(HtslibOptionsTest, InputFilterKeepsWhatSamtoolsKeeps) {
  const auto [expected, actual] =
      SortBoth("--input-fmt-option 'filter=flag.read1 && mapq >= 30'", sam_);
  EXPECT_EQ(actual, expected);
  const auto [all, unused] = SortBoth("", sam_);
  EXPECT_GT(Records(expected), 0u);
  EXPECT_LT(Records(expected), Records(all));  // The filter did leave records out.
}

// CRAM decodes only the fields asked for: with required_fields=0x1ff no
// SEQ, QUAL or tags, as samtools writes them.
TEST_F(HtslibOptionsTest, CramRequiredFieldsDecodeWhatSamtoolsDecodes) {
  const std::string cram = dir_.File("in.cram");
  const CommandResult r = RunCommand(
      absl::StrCat("samtools view -C --output-fmt-option no_ref=1 -o ", cram, " ", sam_));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const auto [expected, actual] = SortBoth("--input-fmt-option required_fields=0x1ff", cram);
  EXPECT_EQ(actual, expected);
  EXPECT_TRUE(absl::StrContains(expected, "\t*\t*\n")) << "no record without SEQ and QUAL";
  const auto [all, unused] = SortBoth("", cram);
  EXPECT_NE(all, expected);
}

TEST_F(HtslibOptionsTest, UnknownInputOptionFailsNamingIt) {
  const std::string out = dir_.File("out.bam");
  CommandResult r =
      RunCommand(absl::StrCat("samtools sort --input-fmt-option bogus=1 -o ", out, " ", sam_));
  EXPECT_NE(r.exit_code, 0);  // samtools refuses it too.
  r = RunCommand(
      absl::StrCat(test_util::RocksortBinary(), " --input-fmt-option bogus=1 -o ", out, " ", sam_));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "unknown input format option \"bogus\""))
      << r.stderr_text;
  EXPECT_FALSE(std::filesystem::exists(out));
}

// A filter that does not parse fails when the input is opened, naming the
// option, and leaves nothing behind (samtools fails too, but at the first
// record, as "truncated file").
TEST_F(HtslibOptionsTest, FilterThatDoesNotParseFailsBeforeSorting) {
  const std::string out = dir_.File("out.bam");
  EXPECT_NE(RunCommand(absl::StrCat("samtools sort --input-fmt-option 'filter=mapq >' -o ", out,
                                    " ", sam_))
                .exit_code,
            0);
  std::filesystem::remove(out);
  const CommandResult r = RunCommand(absl::StrCat(
      test_util::RocksortBinary(), " --input-fmt-option 'filter=mapq >' -o ", out, " ", sam_));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.stderr_text,
                                "--input-fmt-option filter=mapq >: htslib can't parse the filter"))
      << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find('\n'), r.stderr_text.size() - 1) << "one line: " << r.stderr_text;
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_EQ(dir_.List(), (std::vector<std::string>{"in.sam"}));
}

// htslib warns of a BAM without its EOF block at level 3 (samtools'
// default) and is silent at 0; rocksort's own warning comes either way.
TEST_F(HtslibOptionsTest, VerbositySetsHtslibsLevelAsInSamtools) {
  const std::string bam = dir_.File("in.bam");
  ASSERT_EQ(RunCommand(absl::StrCat("samtools view -b -o ", bam, " ", sam_)).exit_code, 0);
  std::filesystem::resize_file(bam, std::filesystem::file_size(bam) - 28);  // The EOF block.
  const std::string out = dir_.File("out.bam");
  constexpr char kHtslibWarning[] = "EOF marker is absent";
  for (const char* level : {"3", "0"}) {
    SCOPED_TRACE(level);
    const bool warns = std::string(level) != "0";
    CommandResult r =
        RunCommand(absl::StrCat("samtools sort --verbosity ", level, " -o ", out, " ", bam));
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_EQ(absl::StrContains(r.stderr_text, kHtslibWarning), warns) << r.stderr_text;
    r = RunCommand(
        absl::StrCat(test_util::RocksortBinary(), " --verbosity ", level, " -o ", out, " ", bam));
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_EQ(absl::StrContains(r.stderr_text, kHtslibWarning), warns) << r.stderr_text;
    EXPECT_TRUE(absl::StrContains(r.stderr_text, "no end-of-file marker")) << r.stderr_text;
  }
  // Without --verbosity, htslib stays quiet (its warnings come with -v).
  const CommandResult r =
      RunCommand(absl::StrCat(test_util::RocksortBinary(), " -o ", out, " ", bam));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_FALSE(absl::StrContains(r.stderr_text, kHtslibWarning)) << r.stderr_text;
}

}  // namespace
}  // namespace rocksort
