// ResolveOutputFormat against samtools 1.23.1 sort's choices (bam_sort.c,
// sam_opts.c, htslib's sam_open_mode, find_file_extension,
// hts_open_format), and the OutputFormat helpers.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "output/output.h"

namespace rocksort::output {
namespace {

// A request for `path` with `-O format` (empty: none) and options given
// as --output-fmt-option.
OutputFormatRequest Request(const std::string& path, const std::string& format = "",
                            const std::vector<std::string>& options = {}, int level = -1) {
  OutputFormatRequest r;
  r.path = path;
  r.format = format;
  if (!format.empty()) r.format_origin = "-O " + format;
  for (const std::string& o : options) r.options.push_back({o, "--output-fmt-option " + o});
  r.level = level;
  return r;
}

struct NameCase {
  const char* path;
  OutputKind kind;
  bool bgzf;
};

TEST(ResolveOutputFormat, NameChoosesTheFormatAsSamOpenMode) {
  const NameCase cases[] = {
      {"out.sam", OutputKind::kSam, false},
      {"out.SAM", OutputKind::kSam, false},  // strcasecmp
      {"out.sam.gz", OutputKind::kSam, true},
      {"out.SAM.gz", OutputKind::kSam, true},
      {"out.sam.GZ", OutputKind::kBam, false},  // ".gz" is matched case-sensitively.
      {"out.cram", OutputKind::kCram, false},
      {"out.Cram", OutputKind::kCram, false},
      {"out.cram.gz", OutputKind::kBam, false},  // sam_open_mode knows no cram.gz.
      {"out.bam", OutputKind::kBam, false},
      {"out.fq", OutputKind::kFastq, false},
      {"out.fastq", OutputKind::kFastq, false},
      {"out.fq.gz", OutputKind::kFastq, true},
      {"out.fastq.gz", OutputKind::kFastq, true},  // 9 characters with the dot: the limit.
      {"out.fa", OutputKind::kFasta, false},
      {"out.FASTA.gz", OutputKind::kFasta, true},
      {"out.sam.bgz", OutputKind::kBam, false},  // Found as "sam.bgz", which is no format.
      {"out.sambam", OutputKind::kBam, false},
      {"out.sam.tmp", OutputKind::kBam, false},
      {"out", OutputKind::kBam, false},
      {"-", OutputKind::kBam, false},  // stdout
      {"dir.sam/out", OutputKind::kBam, false},
      {"dir/.sam", OutputKind::kSam, false},
      {".sam", OutputKind::kSam, false},
      {"x.gz", OutputKind::kBam, false},
      {"out.s", OutputKind::kBam, false},                    // Too short an extension.
      {"out.cram##idx##out.bai", OutputKind::kCram, false},  // Before the index delimiter.
      {"out.bam##idx##out.sam", OutputKind::kBam, false},
  };
  for (const NameCase& c : cases) {
    SCOPED_TRACE(c.path);
    const absl::StatusOr<OutputFormat> f = ResolveOutputFormat(Request(c.path));
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->kind, c.kind);
    EXPECT_EQ(f->bgzf, c.bgzf);
  }
}

struct DashOCase {
  const char* path;
  const char* format;
  std::vector<std::string> options;
  OutputKind kind;
  bool bgzf;
};

// -O overrides the name; text keeps the name's BGZF compression; -O sam.gz
// and -O sam with a level option compress; -O fastq.gz does not (htslib
// only turns "compressed" into BGZF for SAM).
TEST(ResolveOutputFormat, DashOOverridesTheNameAsSamtools) {
  const DashOCase cases[] = {
      {"out.bam", "sam", {}, OutputKind::kSam, false},
      {"out.bam", "SAM", {}, OutputKind::kSam, false},
      {"out.sam.gz", "sam", {}, OutputKind::kSam, true},
      {"out.bam", "sam", {"level=1"}, OutputKind::kSam, true},
      {"out.bam", "sam", {"level=0"}, OutputKind::kSam, true},
      {"out.bam", "sam.gz", {}, OutputKind::kSam, true},
      {"-", "sam", {}, OutputKind::kSam, false},
      {"out.sam", "bam", {}, OutputKind::kBam, false},
      {"out.sam.gz", "bam", {}, OutputKind::kBam, false},
      {"out.bam", "cram", {}, OutputKind::kCram, false},
      {"out.sam.gz", "CRAM", {}, OutputKind::kCram, false},
      {"out.bam", "fastq", {}, OutputKind::kFastq, false},
      {"out.bam", "fq", {}, OutputKind::kFastq, false},
      {"out.bam", "fastq.gz", {}, OutputKind::kFastq, false},
      {"out.fq.gz", "fastq", {}, OutputKind::kFastq, true},
      {"out.bam", "fa.gz", {}, OutputKind::kFasta, false},
      {"out.fa.gz", "sam", {}, OutputKind::kSam, true},
      {"out.fq", "sam", {}, OutputKind::kSam, false},
      {"out.sam", "fasta", {"level=3"}, OutputKind::kFasta, false},
      // hts_parse_format keeps only the first 8 characters of the name.
      {"out.bam", "fastq.gzip", {}, OutputKind::kFastq, false},
  };
  for (const DashOCase& c : cases) {
    SCOPED_TRACE(std::string(c.path) + " -O " + c.format);
    const absl::StatusOr<OutputFormat> f =
        ResolveOutputFormat(Request(c.path, c.format, c.options));
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->kind, c.kind);
    EXPECT_EQ(f->bgzf, c.bgzf);
  }
  // Without -O a level option does not compress SAM named .sam (samtools
  // writes plain SAM and ignores the level).
  const absl::StatusOr<OutputFormat> plain =
      ResolveOutputFormat(Request("out.sam", "", {"level=1"}));
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->bgzf);
}

TEST(ResolveOutputFormat, UnknownAndNonAlignmentFormatsAreRefused) {
  for (const char* format : {"foo", "vcf", "BCF", "cram2", "sam.bz2", "json"}) {
    SCOPED_TRACE(format);
    const absl::StatusOr<OutputFormat> f = ResolveOutputFormat(Request("out.bam", format));
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(f.status().message(), std::string("-O ") + format)) << f.status();
  }
  OutputFormatRequest empty = Request("out.bam");
  empty.format_origin = "-O ";  // -O "" was given.
  EXPECT_FALSE(ResolveOutputFormat(empty).ok());
}

TEST(ResolveOutputFormat, OptionsAreHtslibsAndSomeAreRefused) {
  for (const char* ok :
       {"level=3", "LEVEL=3", "version=3.0", "VERSION=2.1", "embed_ref=1", "embed_ref", "no_ref=1",
        "reference=ref.fa", "store_md=1", "small", "seqs_per_slice=500", "use_lzma=0",
        "fastq_aux=RG", "cache_size=10M", "block_size=4096"}) {
    SCOPED_TRACE(ok);
    const absl::StatusOr<OutputFormat> f = ResolveOutputFormat(Request("out.cram", "", {ok}));
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->options, std::vector<std::string>{ok});
  }
  for (const char* bad :
       {"bogus=1", "Level=3", "STORE_MD=1", "nthreads=2", "NTHREADS=2", "filter=flag.unmap",
        "verbosity=8", "level", "level=10", "level=-1", "level=x", "level=+3", "level=09",
        "level=07", "cache_size=1x", "fastq_umi=RX"}) {
    SCOPED_TRACE(bad);
    const absl::StatusOr<OutputFormat> f = ResolveOutputFormat(Request("out.cram", "", {bad}));
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    // The message names the flag that gave it.
    EXPECT_TRUE(absl::StrContains(f.status().message(), std::string("--output-fmt-option ") + bad))
        << f.status();
  }
  EXPECT_TRUE(absl::StrContains(
      ResolveOutputFormat(Request("out.bam", "", {"nthreads=2"})).status().message(), "-@"));
}

// -l/-u is the mode's digit; level= options and the profiles override it
// in order, as hts_opt_apply applies them after opening.
TEST(ResolveOutputFormat, LevelsAsSamtoolsAppliesThem) {
  struct Case {
    int level;
    std::vector<std::string> options;
    int effective;
  };
  const Case cases[] = {
      {-1, {}, -1},
      {3, {}, 3},
      {0, {}, 0},
      {0, {"level=9"}, 9},
      {9, {"level=0"}, 0},
      {-1, {"level=1", "level=5"}, 5},
      {4, {"fast"}, 2},
      {4, {"normal"}, -1},
      {4, {"small"}, 9},
      {4, {"archive", "level=3"}, 3},
      {4, {"reference=x"}, 4},
  };
  for (const Case& c : cases) {
    const absl::StatusOr<OutputFormat> f =
        ResolveOutputFormat(Request("out.bam", "", c.options, c.level));
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->level, c.level);
    EXPECT_EQ(f->EffectiveLevel(), c.effective) << c.level;
  }
}

TEST(OutputFormat, HtsModeIsWhatSamtoolsOpens) {
  auto mode = [](const std::string& path, const std::string& format, int level,
                 const std::vector<std::string>& options = {}) {
    absl::StatusOr<OutputFormat> f = ResolveOutputFormat(Request(path, format, options, level));
    return f.ok() ? f->HtsMode() : std::string(f.status().message());
  };
  EXPECT_EQ(mode("out.sam", "", -1), "w");
  EXPECT_EQ(mode("out.sam", "", 6), "w6");  // htslib ignores the digit for plain text.
  EXPECT_EQ(mode("out.sam.gz", "", 1), "wz1");
  EXPECT_EQ(mode("out.bam", "sam", -1, {"level=2"}), "wz");
  EXPECT_EQ(mode("out.cram", "", 0), "wc0");
  EXPECT_EQ(mode("-", "cram", -1), "wc");
  EXPECT_EQ(mode("out.fq.gz", "", -1), "wfz");
  EXPECT_EQ(mode("out.fa", "", 9), "wF9");
  EXPECT_EQ(mode("out.bam", "", -1), "wb");
}

TEST(OutputFormat, DescribesIndexesAndReferences) {
  OutputFormat f;
  EXPECT_EQ(f.Describe(), "BAM");
  EXPECT_TRUE(f.indexable());
  EXPECT_STREQ(f.index_suffix(), ".csi");
  f.kind = OutputKind::kSam;
  EXPECT_EQ(f.Describe(), "SAM");
  EXPECT_FALSE(f.indexable());  // samtools' auto_index fails for plain SAM.
  f.bgzf = true;
  EXPECT_EQ(f.Describe(), "BGZF-compressed SAM");
  EXPECT_TRUE(f.indexable());
  EXPECT_STREQ(f.index_suffix(), ".csi");
  f.kind = OutputKind::kFastq;
  EXPECT_FALSE(f.indexable());
  f.kind = OutputKind::kCram;
  f.bgzf = false;
  EXPECT_TRUE(f.indexable());
  EXPECT_STREQ(f.index_suffix(), ".crai");
  EXPECT_EQ(f.reference(), "");
  f.options = {"reference=a.fa", "version=3.0", "REFERENCE=b.fa"};
  EXPECT_EQ(f.reference(), "b.fa");  // The last one, as hts_opt_apply leaves it.
}

}  // namespace
}  // namespace rocksort::output
