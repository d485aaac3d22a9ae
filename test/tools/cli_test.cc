#include "cli.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace rocksort::tools {
namespace {

using ::rocksort::test_util::RunCommand;

absl::StatusOr<Command> Parse(std::vector<std::string> args, bool tty = false) {
  args.insert(args.begin(), "rocksort");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return ParseCommandLine(static_cast<int>(args.size()), argv.data(), tty);
}

TEST(ParseCommandLine, SamtoolsStyleFlags) {
  absl::StatusOr<Command> c = Parse({"-@", "4", "-m", "1G", "-l", "3", "-T", "/tmp/x", "-s", "512G",
                                     "--no-PG", "-o", "out.bam", "in.bam"});
  ASSERT_TRUE(c.ok()) << c.status();
  const pipeline::SortOptions& o = c->sort;
  EXPECT_EQ(o.threads, 4);
  EXPECT_EQ(o.memory_per_thread, 1ull << 30);
  EXPECT_EQ(o.format.level, 3);
  EXPECT_EQ(o.temp_prefix, "/tmp/x");
  EXPECT_EQ(o.size_hint, std::optional<uint64_t>(512ull << 30));
  EXPECT_FALSE(o.add_pg);
  EXPECT_EQ(o.inputs, std::vector<std::string>{"in.bam"});
  EXPECT_EQ(o.output, "out.bam");
}

// The unknown option is named, also inside a group of short options and
// first in one (where getopt has not moved past the group yet).
TEST(ParseCommandLine, UnknownOptionIsNamed) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"-Z", "in.bam"},
                                               {"-Zv", "-o", "o.bam", "in.bam"},
                                               {"-vZ", "in.bam"}}) {
    absl::StatusOr<Command> c = Parse(args);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().message(), "unknown option -Z") << args[0];
  }
  absl::StatusOr<Command> c = Parse({"-v", "--no-such-option", "in.bam"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "unknown option --no-such-option");
}

TEST(ParseCommandLine, PositionalOutputAndStdin) {
  absl::StatusOr<Command> c = Parse({"in.bam", "out.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sort.output, "out.bam");
  c = Parse({"-"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sort.inputs, std::vector<std::string>{"-"});
  EXPECT_EQ(c->sort.output, "-");
  c = Parse({});  // stdin is a pipe.
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->action, Command::Action::kSort);
  c = Parse({}, /*tty=*/true);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->action, Command::Action::kHelp);
}

// samtools' rules: the last of -n/-N/--template-coordinate wins, -N also
// makes a later -n lexicographic, -t turns any order but query name into
// tag-then-coordinate.
TEST(ParseCommandLine, OrderFlagsCombineAsInSamtools) {
  using keycodec::OrderKind;
  struct Case {
    std::vector<std::string> flags;
    OrderKind kind;
    bool natural;
    std::string tag;
  };
  const Case cases[] = {
      {{}, OrderKind::kCoordinate, true, ""},
      {{"-n"}, OrderKind::kQueryName, true, ""},
      {{"-N"}, OrderKind::kQueryName, false, ""},
      {{"-N", "-n"}, OrderKind::kQueryName, false, ""},
      {{"-n", "--template-coordinate"}, OrderKind::kTemplateCoordinate, true, ""},
      {{"--template-coordinate", "-n"}, OrderKind::kQueryName, true, ""},
      {{"-t", "RG"}, OrderKind::kCoordinate, true, "RG"},
      {{"-t", "RGX", "-n"}, OrderKind::kQueryName, true, "RG"},
      {{"-t", "AS", "-N"}, OrderKind::kQueryName, false, "AS"},
      {{"--template-coordinate", "-t", "MI"}, OrderKind::kCoordinate, true, "MI"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.flags;
    args.push_back("in.bam");
    const absl::StatusOr<Command> command = Parse(args);
    ASSERT_TRUE(command.ok()) << command.status();
    EXPECT_EQ(command->sort.order.kind, c.kind) << args[0];
    EXPECT_EQ(command->sort.order.natural, c.natural) << args[0];
    EXPECT_EQ(command->sort.order.tag, c.tag) << args[0];
  }
  EXPECT_FALSE(Parse({"-t", "X", "in.bam"}).ok());
}

TEST(ParseCommandLine, WriteIndexIsDroppedWithAWarningForOtherOrders) {
  absl::StatusOr<Command> c = Parse({"-n", "--write-index", "-o", "o.bam##idx##o.bai", "in.bam"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->sort.write_index);
  EXPECT_EQ(c->sort.output, "o.bam");
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_TRUE(absl::StrContains(c->warnings[0], "--write-index"));
  c = Parse({"--write-index", "-o", "o.bam", "in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->sort.write_index);
  EXPECT_TRUE(c->warnings.empty());
}

TEST(ParseCommandLine, MinimiserOrderTakesSamtoolsOptions) {
  absl::StatusOr<Command> c = Parse({"-M", "in.bam"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.order.kind, keycodec::OrderKind::kMinimiser);
  EXPECT_EQ(c->sort.order.minimiser, keycodec::MinimiserOptions{});
  c = Parse({"-K", "31", "-R", "-M", "-H", "in.bam"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.order.minimiser.kmer, 31);
  EXPECT_FALSE(c->sort.order.minimiser.try_reverse);
  EXPECT_TRUE(c->sort.order.minimiser.squash_homopolymers);
  // The last order flag wins, as in samtools; -t replaces -M.
  c = Parse({"-M", "-n", "in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sort.order.kind, keycodec::OrderKind::kQueryName);
  c = Parse({"-n", "-M", "in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sort.order.kind, keycodec::OrderKind::kMinimiser);
  c = Parse({"-M", "-t", "RG", "in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sort.order, (keycodec::SortOrder{keycodec::OrderKind::kCoordinate, true, "RG"}));
  // An index, as samtools writes one for -M.
  c = Parse({"-M", "--write-index", "-o", "o.bam", "in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->sort.write_index);
  EXPECT_TRUE(c->warnings.empty());
  for (const char* k : {"0", "32", "x", "-1"}) {
    EXPECT_FALSE(Parse({"-M", "-K", k, "in.bam"}).ok()) << k;
  }
}

TEST(ParseCommandLine, MinimiserParametersWithoutTheOrderAreRefused) {
  // samtools parses them and does nothing: rocksort says so.
  for (const std::vector<std::string>& flags : std::vector<std::vector<std::string>>{
           {"-R"}, {"-H"}, {"-K", "20"}, {"-K", "20", "-M", "-n"}, {"-M", "-R", "-t", "RG"}}) {
    std::vector<std::string> args = flags;
    args.push_back("in.bam");
    const absl::StatusOr<Command> c = Parse(args);
    ASSERT_FALSE(c.ok()) << flags[0];
    EXPECT_TRUE(absl::StrContains(c.status().message(), "only applies to the minimiser order"))
        << c.status();
  }
  // A reference index for minimisers (-I, its window -w) is not there.
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{{"-w", "100"}, {"-I", "ref.fa"}, {"-M", "-I", "r"}}) {
    std::vector<std::string> args = flags;
    args.push_back("in.bam");
    const absl::StatusOr<Command> c = Parse(args);
    ASSERT_FALSE(c.ok()) << flags[0];
    EXPECT_TRUE(absl::StrContains(c.status().message(), "not supported")) << c.status();
  }
}

// --verbosity is htslib's level, as samtools sets hts_verbose; unset, the
// CLI keeps htslib quiet unless -v.
TEST(ParseCommandLine, VerbositySetsHtslibsLevelApartFromDashV) {
  absl::StatusOr<Command> c = Parse({"in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->hts_verbosity.has_value());
  c = Parse({"--verbosity", "4", "-v", "in.bam"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hts_verbosity, std::optional<int>(4));
  EXPECT_EQ(c->sort.verbosity, 1);
  c = Parse({"--verbosity=0", "--verbosity", "8", "in.bam"});  // The last wins.
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hts_verbosity, std::optional<int>(8));
  for (const char* bad : {"x", "-1", "3.5", ""}) {
    c = Parse({"--verbosity", bad, "in.bam"});
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_TRUE(absl::StrContains(c.status().message(), "--verbosity")) << c.status();
  }
}

TEST(ParseCommandLine, ProgressIsAutomaticUnlessForcedEitherWay) {
  absl::StatusOr<Command> c = Parse({"in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->progress.has_value());  // On when stderr is a terminal.
  c = Parse({"--progress", "in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->progress, std::optional<bool>(true));
  c = Parse({"--no-progress", "in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->progress, std::optional<bool>(false));
  c = Parse({"--no-progress", "--progress", "in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->progress, std::optional<bool>(true));
}

// Repeatable, in order, as samtools collects them; an option htslib does not
// know, or one rocksort sets otherwise, is refused by name.
TEST(ParseCommandLine, InputFormatOptionsAreCheckedAndKeptInOrder) {
  absl::StatusOr<Command> c = Parse(
      {"--input-fmt-option", "required_fields=0x1ff", "--input-fmt-option", "decode_md=0",
       "--input-fmt-option", "filter=mapq>=20", "--input-fmt-option", "IGNORE_MD5", "in.cram"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.input_format_options,
            (std::vector<std::string>{"required_fields=0x1ff", "decode_md=0", "filter=mapq>=20",
                                      "IGNORE_MD5"}));
  EXPECT_TRUE(Parse({"in.bam"})->sort.input_format_options.empty());
  struct Refusal {
    const char* option;
    const char* says;
  };
  for (const Refusal& r : {Refusal{"bogus=1", "bogus"}, Refusal{"Decode_MD=0", "Decode_MD"},
                           Refusal{"cache_size=1x", "cache_size"}, Refusal{"nthreads=4", "-@"},
                           Refusal{"verbosity=3", "--verbosity"}}) {
    c = Parse({"--input-fmt-option", r.option, "in.bam"});
    ASSERT_FALSE(c.ok()) << r.option;
    EXPECT_TRUE(absl::StrContains(c.status().message(), r.option)) << c.status();
    EXPECT_TRUE(absl::StrContains(c.status().message(), r.says)) << c.status();
  }
}

TEST(ParseCommandLine, CompactionCanBeEstimatedOrSwitchedOff) {
  absl::StatusOr<Command> c = Parse({"in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->sort.size_hint.has_value());  // Estimated from the input.
  c = Parse({"--no-compaction", "in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sort.size_hint, std::optional<uint64_t>(0));
  c = Parse({"-s", "0", "in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sort.size_hint, std::optional<uint64_t>(0));
  c = Parse({"--stats-json", "s.json", "--disk", "auto", "in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->stats_json, "s.json");
  EXPECT_FALSE(c->sort.disk.has_value());
  EXPECT_EQ(c->sort.run_compression, store::RunCompression::kAuto);
  c = Parse({"--run-compression", "snappy", "in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sort.run_compression, store::RunCompression::kSnappy);
  c = Parse({"--run-compression", "zstd", "in.bam"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.run_compression, store::RunCompression::kZstd);
  c = Parse({"--run-compression", "none", "in.bam"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.run_compression, store::RunCompression::kNone);
  c = Parse({"--run-compression", "lz4", "in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sort.run_compression, store::RunCompression::kLz4);
  c = Parse({"--run-compression", "none", "--run-compression", "auto", "in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sort.run_compression, store::RunCompression::kAuto);
  EXPECT_FALSE(Parse({"--run-compression", "gzip", "in.bam"}).ok());
}

TEST(ParseCommandLine, SamtoolsLongSpellings) {
  absl::StatusOr<Command> c = Parse(
      {"--threads", "3", "-O", "bam", "--output-fmt", "BAM", "--reference", "r.fa", "in.cram"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.threads, 3);
  EXPECT_EQ(c->sort.reference, "r.fa");
  EXPECT_EQ(c->sort.format.kind, output::OutputKind::kBam);
  // --reference is also the CRAM output's reference, as in samtools.
  EXPECT_EQ(c->sort.format.reference(), "r.fa");
  c = Parse({"--output-fmt", "sam", "in.bam"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.format.kind, output::OutputKind::kSam);
  for (const char* format : {"", "vcf", "sam2"}) {
    c = Parse({"-O", format, "in.bam"});
    EXPECT_FALSE(c.ok()) << format;
  }
}

// samtools' output format options: level=N overrides -l and -u whatever the
// order (samtools applies them after opening the output); threads (use -@)
// and levels outside 0..9 or in octal are refused.
TEST(ParseCommandLine, OutputFormatOptionLevel) {
  absl::StatusOr<Command> c = Parse({"-O", "bam,level=1", "in.bam"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.format.EffectiveLevel(), 1);
  c = Parse({"-O", "BAM,level=9", "-l", "0", "in.bam"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.format.EffectiveLevel(), 9);
  c = Parse({"--output-fmt-option", "level=0", "-l", "9", "in.bam"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.format.EffectiveLevel(), 0);
  c = Parse({"-u", "--output-fmt-option", "level=5", "in.bam"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.format.EffectiveLevel(), 5);
  c = Parse({"-O", "bam,", "-l", "3", "in.bam"});  // An empty option, as samtools allows.
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.format.EffectiveLevel(), 3);
  c = Parse({"-O", "bam,LEVEL=2", "in.bam"});  // htslib also takes upper case.
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.format.EffectiveLevel(), 2);
  c = Parse({"-O", "bam,level=0", "in.bam"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.format.EffectiveLevel(), 0);
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"-O", "bam,level=10"},
                                             {"-O", "bam,level=x"},
                                             {"-O", "bam,nthreads=2"},
                                             {"--output-fmt-option", "nthreads=2"},
                                             {"--output-fmt-option", "level"},
                                             {"--output-fmt-option", "level=-1"},
                                             // samtools reads these as octal 0.
                                             {"-O", "bam,level=09"},
                                             {"--output-fmt-option", "level=07"}}) {
    std::vector<std::string> line = args;
    line.push_back("in.bam");
    c = Parse(line);
    ASSERT_FALSE(c.ok()) << args[1];
    EXPECT_TRUE(absl::StrContains(c.status().message(), args[1])) << c.status();
  }
}

// As samtools: the output's name chooses the format unless -O says
// otherwise (the rules themselves: test/output/output_format_test.cc).
TEST(ParseCommandLine, OutputNameOrDashOChoosesTheFormat) {
  using output::OutputKind;
  struct Case {
    std::vector<std::string> args;
    OutputKind kind;
    bool bgzf;
  };
  const Case cases[] = {
      {{"-o", "out.sam"}, OutputKind::kSam, false},
      {{"-o", "out.SAM"}, OutputKind::kSam, false},
      {{"-o", "out.sam.gz"}, OutputKind::kSam, true},
      {{"-o", "out.cram"}, OutputKind::kCram, false},
      {{"-o", "out.fastq.gz"}, OutputKind::kFastq, true},
      {{"-o", "out.FA"}, OutputKind::kFasta, false},
      {{"-o", "out.bam"}, OutputKind::kBam, false},
      {{"-o", "out.sambam"}, OutputKind::kBam, false},
      {{"-o", "out.sam.GZ"}, OutputKind::kBam, false},  // htslib matches ".gz" case-sensitively.
      {{"-o", "o.bam##idx##x.cram.csi"}, OutputKind::kBam, false},
      {{"-o", "o.cram##idx##x.crai"}, OutputKind::kCram, false},
      {{}, OutputKind::kBam, false},  // stdout
      {{"-O", "sam"}, OutputKind::kSam, false},
      {{"-O", "sam,level=1"}, OutputKind::kSam, true},
      {{"--output-fmt-option", "level=1", "-O", "SAM"}, OutputKind::kSam, true},
      {{"-O", "bam", "-o", "out.sam"}, OutputKind::kBam, false},
      {{"-O", "cram", "-o", "out.bam"}, OutputKind::kCram, false},
      {{"-O", "sam", "-O", "cram"}, OutputKind::kCram, false},  // The last -O wins.
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    args.push_back("in.bam");
    SCOPED_TRACE(absl::StrJoin(args, " "));
    const absl::StatusOr<Command> command = Parse(args);
    ASSERT_TRUE(command.ok()) << command.status();
    EXPECT_EQ(command->sort.format.kind, c.kind);
    EXPECT_EQ(command->sort.format.bgzf, c.bgzf);
  }
  // The positional output too.
  absl::StatusOr<Command> c = Parse({"in.bam", "out.cram"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sort.format.kind, OutputKind::kCram);
  // -l and -u set the mode's level for every format; level= options are
  // applied after it, in order.
  c = Parse({"-u", "-O", "cram,level=3", "--output-fmt-option", "version=3.0", "in.bam"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.format.HtsMode(), "wc0");
  EXPECT_EQ(c->sort.format.options, (std::vector<std::string>{"level=3", "version=3.0"}));
  EXPECT_EQ(c->sort.format.EffectiveLevel(), 3);
  c = Parse({"-l", "4", "-o", "out.sam", "in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sort.format.HtsMode(), "w4");  // htslib ignores it for plain SAM, as samtools.
}

// samtools can't index uncompressed SAM, FASTQ or FASTA (it fails after
// sorting); rocksort refuses at once, unless the order drops the index.
TEST(ParseCommandLine, WriteIndexNeedsAFormatSamtoolsCanIndex) {
  for (const char* out : {"out.sam", "out.fq", "out.fa.gz"}) {
    const absl::StatusOr<Command> c = Parse({"--write-index", "-o", out, "in.bam"});
    ASSERT_FALSE(c.ok()) << out;
    EXPECT_TRUE(absl::StrContains(c.status().message(), "--write-index")) << c.status();
  }
  for (const char* out : {"out.sam.gz", "out.cram", "out.bam", "out.cram##idx##x.crai"}) {
    const absl::StatusOr<Command> c = Parse({"--write-index", "-o", out, "in.bam"});
    EXPECT_TRUE(c.ok()) << out << ": " << c.status();
  }
  EXPECT_TRUE(Parse({"-n", "--write-index", "-o", "out.sam", "in.bam"}).ok());
}

TEST(ParseCommandLine, WriteIndexAndSamtoolsIndexNames) {
  absl::StatusOr<Command> c = Parse({"--write-index", "-o", "out.bam##idx##out.bai", "in.bam"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->sort.write_index);
  EXPECT_EQ(c->sort.output, "out.bam");
  EXPECT_EQ(c->sort.index_output, "out.bai");
  c = Parse({"--write-index", "in.bam", "out.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sort.index_output, "");                    // OUT.csi.
  EXPECT_FALSE(Parse({"--write-index", "in.bam"}).ok());  // stdout.
  EXPECT_FALSE(Parse({"-o", "out.bam##idx##", "in.bam"}).ok());
  EXPECT_FALSE(Parse({"-o", "##idx##x.bai", "in.bam"}).ok());
}

TEST(ParseCommandLine, BudgetThatOverflowsIsRejected) {
  // 4097 TiB x 1024 threads is above 2^62 bytes; 4096 TiB x 1024 is not.
  EXPECT_FALSE(Parse({"-m", "4097T", "-@", "1024", "in.bam"}).ok());
  EXPECT_FALSE(Parse({"-@", "1024", "-m", "4097T", "in.bam"}).ok());
  EXPECT_TRUE(Parse({"-m", "4096T", "-@", "1024", "in.bam"}).ok());
}

// -u is -l 0, and as in samtools the later of the two wins.
TEST(ParseCommandLine, UncompressedMeansLevelZero) {
  absl::StatusOr<Command> c = Parse({"-l", "7", "-u", "in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sort.format.level, 0);
  c = Parse({"-u", "-l", "7", "in.bam"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sort.format.level, 7);
}

TEST(ParseCommandLine, RejectsNonsenseValues) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"-m", "0", "in.bam"},
                                             {"-m", "12Q", "in.bam"},
                                             {"-m", "1023K", "in.bam"},
                                             {"-@", "-3", "in.bam"},
                                             {"-@", "two", "in.bam"},
                                             {"-l", "11", "in.bam"},
                                             {"-s", "lots", "in.bam"},
                                             {"--disk", "tape", "in.bam"},
                                             {"--run-compression", "zlib", "in.bam"},
                                             {"-T", "", "in.bam"},
                                             {"--bogus", "in.bam"},
                                             {"a.bam", "b.bam", "c.bam"},
                                             {"in.bam", "-m"}}) {
    EXPECT_FALSE(Parse(args).ok()) << args[0] << " " << args[1];
  }
}

// With -o every positional argument is an input; without, the last of two
// is the output and a third is refused.
TEST(ParseCommandLine, SeveralInputsNeedDashO) {
  absl::StatusOr<Command> c = Parse({"-o", "out.bam", "a.bam", "-", "c.cram"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.inputs, (std::vector<std::string>{"a.bam", "-", "c.cram"}));
  EXPECT_EQ(c->sort.output, "out.bam");
  c = Parse({"a.bam", "b.bam"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.inputs, std::vector<std::string>{"a.bam"});
  EXPECT_EQ(c->sort.output, "b.bam");
  c = Parse({"a.bam", "b.bam", "c.bam"});
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::StrContains(c.status().message(), "-o")) << c.status();
}

// As samtools merge: the inputs of every -b list, in order, then those on
// the command line; empty lines are skipped.
TEST(ParseCommandLine, InputListsComeBeforePositionalInputs) {
  test_util::ScratchDir dir;
  const std::string list1 = dir.File("one.txt");
  const std::string list2 = dir.File("two.txt");
  test_util::WriteFileOrDie(list1, "a.bam\n\nb 2.sam\r\n");
  test_util::WriteFileOrDie(list2, "c.cram");
  absl::StatusOr<Command> c = Parse({"-b", list1, "-o", "out.bam", "x.bam", "-b", list2});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.inputs, (std::vector<std::string>{"a.bam", "b 2.sam", "c.cram", "x.bam"}));
  // A list alone: no stdin, even when stdin is a terminal.
  c = Parse({"-b", list2}, /*tty=*/true);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->action, Command::Action::kSort);
  EXPECT_EQ(c->sort.inputs, std::vector<std::string>{"c.cram"});
}

TEST(ParseCommandLine, MissingOrEmptyInputListIsAnErrorNamingIt) {
  test_util::ScratchDir dir;
  const std::string missing = dir.File("missing.txt");
  absl::StatusOr<Command> c = Parse({"-b", missing, "-o", "out.bam"});
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsNotFound(c.status())) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), missing)) << c.status();
  const std::string empty = dir.File("empty.txt");
  test_util::WriteFileOrDie(empty, "\n\n");
  c = Parse({"-b", empty, "-o", "out.bam"});
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::StrContains(c.status().message(), empty)) << c.status();
}

// samtools sorts a file onto itself; so does rocksort (the output replaces
// the input only once complete: EndToEndTest.OutputMayBeTheInputFile).
TEST(ParseCommandLine, OutputMayBeTheInput) {
  const absl::StatusOr<Command> c = Parse({"x.bam", "x.bam"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sort.inputs, std::vector<std::string>{"x.bam"});
  EXPECT_EQ(c->sort.output, "x.bam");
}

TEST(RocksortBinary, HelpGoesToStdoutWithExitZero) {
  const test_util::CommandResult r = RunCommand(test_util::RocksortBinary() + " -h");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.stdout_text.find("Usage: rocksort"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("[768M]"), std::string::npos);  // Default from the struct.
}

TEST(RocksortBinary, MisuseGoesToStderrWithExitOne) {
  const test_util::CommandResult r = RunCommand(test_util::RocksortBinary() + " -m 12Q in.bam");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.stderr_text.find("12Q"), std::string::npos);
  EXPECT_NE(r.stderr_text.find("Usage:"), std::string::npos);
  EXPECT_EQ(r.stdout_text, "");
}

TEST(RocksortBinary, MissingInputNamesTheFile) {
  test_util::ScratchDir dir;
  const test_util::CommandResult r = RunCommand(test_util::RocksortBinary() + " -o " +
                                                dir.File("o.bam") + " " + dir.File("nope.bam"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.stderr_text.find("nope.bam"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("No such file"), std::string::npos) << r.stderr_text;
  EXPECT_TRUE(dir.List().empty());
}

TEST(RocksortBinary, VersionPrintsVersion) {
  const test_util::CommandResult r = RunCommand(test_util::RocksortBinary() + " --version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_text.rfind("rocksort ", 0), 0u);
}

}  // namespace
}  // namespace rocksort::tools
