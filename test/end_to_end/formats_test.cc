// End-to-end: output formats other than BAM through the rocksort binary,
// against Debian's `samtools sort` writing the same format: SAM text
// (records and header, without @PG) exactly; CRAM decoded with the same
// reference; .crai and CSI indexes answering region queries as samtools'
// own; FASTQ byte for byte; and clean failures, leaving nothing behind,
// where the output can't be written as asked.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace rocksort {
namespace {

using test_util::CommandResult;
using test_util::RunCommand;
using test_util::ScratchDir;

// Lines of `text` other than those starting with one of `prefixes`.
std::string WithoutLines(const std::string& text, const std::vector<std::string>& prefixes) {
  std::vector<absl::string_view> kept;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    bool drop = false;
    for (const std::string& p : prefixes) drop |= absl::StartsWith(line, p);
    if (!drop) kept.push_back(line);
  }
  return absl::StrJoin(kept, "\n");
}

class FormatsTest : public ::testing::Test {
 protected:
  // htslib must find references only where a test says (never on the network).
  std::string Env() const { return test_util::NoReferenceLookupEnv(dir_); }

  std::string Generate(const std::string& name, const std::string& args) {
    const std::string path = dir_.File(name);
    const CommandResult r =
        RunCommand(absl::StrCat(test_util::GenReadsBinary(), " ", args, " -o ", path));
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    return path;
  }

  // A FASTA with the @SQ names and lengths of `alignments`, 60 bases a line.
  std::string MakeReference(const std::string& alignments) {
    const std::string fasta =
        test_util::FastaForHeader(RunCommand("samtools view -H " + alignments).stdout_text);
    const std::string path = dir_.File("ref.fa");
    test_util::WriteFileOrDie(path, fasta);
    EXPECT_EQ(RunCommand("samtools faidx " + path).exit_code, 0);
    return path;
  }

  // samtools sort with `args` (naming the output and input).
  void Samtools(const std::string& args) {
    const CommandResult r = RunCommand(absl::StrCat(Env(), "samtools sort ", args));
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  }

  CommandResult Rocksort(const std::string& args) {
    return RunCommand(absl::StrCat(Env(), test_util::RocksortBinary(), " ", args));
  }

  // `path` as SAM text without @PG lines (decoded with `reference` if given).
  std::string SamText(const std::string& path, const std::string& reference = "") {
    const CommandResult r =
        RunCommand(absl::StrCat(Env(), "samtools view --no-PG -h ",
                                reference.empty() ? "" : "-T " + reference + " ", path));
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    return WithoutLines(r.stdout_text, {"@PG\t"});
  }

  // The file's text without @PG lines, as written.
  std::string FileWithoutPg(const std::string& path) {
    return WithoutLines(test_util::ReadFileOrDie(path), {"@PG\t"});
  }

  // No temporary directory or partial output left in dir_.
  void ExpectNoTempLeftovers() {
    for (const std::string& name : dir_.List()) {
      EXPECT_EQ(name.find("rocksort."), std::string::npos) << "left behind: " << name;
      EXPECT_EQ(name.find(".partial."), std::string::npos) << "left behind: " << name;
    }
  }

  bool Exists(const std::string& path) { return std::filesystem::exists(path); }

  ScratchDir dir_;
};

// Records > 64 KiB, CIGARs > 65535 operations, huge aux tags, unmapped
// reads, ties: the text samtools writes, whether SAM is chosen by the
// name or by -O, with many runs and merges (-m 2M) and threads.
TEST_F(FormatsTest, SamMatchesSamtoolsByNameAndByDashO) {
  const std::string in = Generate("in.bam", "-n 3000 --seed 31 --edge-cases");
  const std::string expected = dir_.File("expected.sam");
  Samtools("-O sam -o " + expected + " " + in);
  const std::string expected_text = FileWithoutPg(expected);
  ASSERT_TRUE(absl::StrContains(expected_text, "@HD\tVN:1.6\tSO:coordinate"));

  const std::string out = dir_.File("out.sam");
  CommandResult r = Rocksort(absl::StrCat("-m 2M -o ", out, " ", in));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stderr_text, "");
  EXPECT_TRUE(FileWithoutPg(out) == expected_text) << "-o out.sam differs from samtools";
  EXPECT_TRUE(absl::StrContains(test_util::ReadFileOrDie(out), "@PG\tID:rocksort"));

  const std::string named_bam = dir_.File("out.bam");  // -O wins over the name.
  r = Rocksort(absl::StrCat("-m 2M -@ 2 -O sam -o ", named_bam, " ", in));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_TRUE(FileWithoutPg(named_bam) == expected_text) << "-O sam differs from samtools";
  ExpectNoTempLeftovers();
}

TEST_F(FormatsTest, SamToStdoutFromStdinMatchesSamtools) {
  const std::string in = Generate("in.sam", "-n 3000 --seed 32");
  const std::string expected = dir_.File("expected.sam");
  Samtools("-O sam -o " + expected + " " + in);
  const std::string out = dir_.File("out.txt");
  const CommandResult r = Rocksort(absl::StrCat("-O sam - < ", in, " > ", out));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_TRUE(FileWithoutPg(out) == FileWithoutPg(expected));
  ExpectNoTempLeftovers();
}

// The other orders write SAM alike. Debian's samtools 1.16 writes no SS
// field in @HD (samtools 1.23.1, which rocksort follows, does: see
// orders_test.cc), so @HD is compared apart.
TEST_F(FormatsTest, NameOrderInSamMatchesSamtools) {
  const std::string in = Generate("in.bam", "-n 3000 --seed 33");
  for (const std::string order : {"-n", "-t RG"}) {
    SCOPED_TRACE(order);
    const std::string expected = dir_.File("expected.sam");
    Samtools(absl::StrCat(order, " -o ", expected, " ", in));
    const std::string out = dir_.File("out.sam");
    const CommandResult r = Rocksort(absl::StrCat(order, " -m 1M -@ 2 -o ", out, " ", in));
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_TRUE(WithoutLines(test_util::ReadFileOrDie(out), {"@PG\t", "@HD\t"}) ==
                WithoutLines(test_util::ReadFileOrDie(expected), {"@PG\t", "@HD\t"}));
    if (order == "-n") {
      EXPECT_TRUE(absl::StartsWith(test_util::ReadFileOrDie(out), "@HD\tVN:1.6\tSO:queryname"));
    }
  }
}

// CRAM decodes, with the same reference, to what Debian's samtools 1.16
// CRAM of the same input decodes to; from a file, with -@ 2, to stdout.
TEST_F(FormatsTest, CramDecodesToWhatSamtoolsCramDoes) {
  const std::string in =
      Generate("in.sam", "-n 2000 --seed 34 --edge-cases --refs 2 --genome-length 250K");
  const std::string ref = MakeReference(in);
  const std::string expected = dir_.File("expected.cram");
  Samtools(absl::StrCat("--reference ", ref, " -O cram -o ", expected, " ", in));
  const std::string expected_text = SamText(expected, ref);
  ASSERT_TRUE(absl::StrContains(expected_text, "\tM5:")) << "the reference was not used";

  const std::string out = dir_.File("out.cram");
  for (const std::string& args :
       {absl::StrCat("-m 2M --reference ", ref, " -o ", out, " ", in),
        absl::StrCat("-m 2M -@ 2 -O cram --reference ", ref, " ", in, " > ", out),
        absl::StrCat("-@ 2 --output-fmt-option reference=", ref, " -O cram,version=3.0 -o ", out,
                     " ", in)}) {
    SCOPED_TRACE(args);
    const CommandResult r = Rocksort(args);
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_EQ(RunCommand("samtools quickcheck " + out).exit_code, 0);
    EXPECT_TRUE(SamText(out, ref) == expected_text) << "decoded CRAM differs from samtools'";
  }
  ExpectNoTempLeftovers();
}

// --write-index writes OUT.crai (or the ##idx## name), the index samtools
// index makes of the same file, and region queries through it find what
// they find through samtools' own.
// A corrupt CRAM that only --reference decodes fails at the same record with
// decode threads as without: with threads the failing record is found by a
// re-read, which must use the reference too (it failed at record 1).
TEST_F(FormatsTest, CorruptCramNamesTheSameRecordWithAndWithoutThreads) {
  const std::string in = Generate("in.sam", "-n 3000 --seed 35 --refs 2 --genome-length 250K");
  const std::string ref = MakeReference(in);
  const std::string cram = dir_.File("in.cram");
  ASSERT_EQ(RunCommand(absl::StrCat(Env(), "samtools view -C -T ", ref,
                                    " --output-fmt-option seqs_per_slice=100 -o ", cram, " ", in))
                .exit_code,
            0);
  // Elsewhere than the @SQ lines' UR: says, so that only --reference finds it.
  const std::string moved = dir_.File("moved.fa");
  ASSERT_EQ(::rename(ref.c_str(), moved.c_str()), 0);
  ASSERT_EQ(::rename((ref + ".fai").c_str(), (moved + ".fai").c_str()), 0);
  std::string bytes = test_util::ReadFileOrDie(cram);
  bytes.replace(bytes.size() / 2, 8, std::string(8, '\xff'));
  test_util::WriteFileOrDie(cram, bytes);
  std::vector<std::string> records;
  for (const char* threads : {"-@ 1", "-@ 2"}) {
    const CommandResult r = Rocksort(
        absl::StrCat(threads, " --reference ", moved, " -o ", dir_.File("out.bam"), " ", cram));
    EXPECT_EQ(r.exit_code, 1) << threads;
    const size_t at = r.stderr_text.find(": record ");
    ASSERT_NE(at, std::string::npos) << threads << ": " << r.stderr_text;
    records.push_back(r.stderr_text.substr(at, r.stderr_text.find(':', at + 2) - at));
  }
  EXPECT_EQ(records[0], records[1]);
  EXPECT_NE(records[0], ": record 1") << "the corruption is past the first slice";
}

TEST_F(FormatsTest, CramWriteIndexAnswersRegionsAsSamtoolsIndex) {
  const std::string in =
      Generate("in.sam", "-n 2000 --seed 35 --edge-cases --refs 2 --genome-length 250K");
  const std::string ref = MakeReference(in);
  const std::string out = dir_.File("out.cram");
  for (const std::string& target : {out, absl::StrCat(out, "##idx##", dir_.File("named.crai"))}) {
    SCOPED_TRACE(target);
    const std::string index =
        absl::StrContains(target, "##idx##") ? dir_.File("named.crai") : out + ".crai";
    const CommandResult r = Rocksort(
        absl::StrCat("-m 2M -@ 2 --write-index --reference ", ref, " -o ", target, " ", in));
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    ASSERT_TRUE(Exists(index));
    const std::string theirs = dir_.File("theirs.crai");
    ASSERT_EQ(RunCommand(absl::StrCat(Env(), "samtools index ", out, " ", theirs)).exit_code, 0);
    EXPECT_EQ(RunCommand("gzip -dc " + index).stdout_text,
              RunCommand("gzip -dc " + theirs).stdout_text);
    for (const char* region : {"chr1", "chr1:1-5000", "chr1:100000-100001", "chr2:50000-90000",
                               "chr2:126000-126238", "*"}) {
      SCOPED_TRACE(region);
      const std::string view = absl::StrCat(Env(), "samtools view --no-PG -T ", ref, " -X ", out);
      const CommandResult mine = RunCommand(absl::StrCat(view, " ", index, " '", region, "'"));
      const CommandResult samtools = RunCommand(absl::StrCat(view, " ", theirs, " '", region, "'"));
      ASSERT_EQ(mine.exit_code, 0) << mine.stderr_text;
      EXPECT_FALSE(mine.stdout_text.empty());
      EXPECT_TRUE(mine.stdout_text == samtools.stdout_text);
    }
    if (index == out + ".crai") {
      // Found by its name, as samtools looks for it.
      const CommandResult found =
          RunCommand(absl::StrCat(Env(), "samtools view -c -T ", ref, " ", out, " chr1:1-50000"));
      const CommandResult counted = RunCommand(absl::StrCat(
          Env(), "samtools view -c -T ", ref, " -X ", out, " ", theirs, " chr1:1-50000"));
      EXPECT_EQ(found.exit_code, 0) << found.stderr_text;
      EXPECT_EQ(found.stdout_text, counted.stdout_text);
    }
    ::unlink(index.c_str());
  }
  ExpectNoTempLeftovers();
}

// A CRAM output whose reference can't be used fails before the sort (no
// temporary database is made: -v would announce it) with exit status 1, a
// message naming the reference, and nothing left behind.
TEST_F(FormatsTest, CramWithoutAReachableReferenceFailsBeforeSortingAndLeavesNothing) {
  const std::string in = Generate("in.sam", "-n 500 --seed 36 --refs 2 --genome-length 20K");
  const std::string missing = dir_.File("missing.fa");
  const std::string not_fasta = dir_.File("not_fasta.fa");
  test_util::WriteFileOrDie(not_fasta, "not a FASTA file\n");
  const std::string out = dir_.File("out.cram");
  struct Case {
    std::string args;
    std::string named;  // In the message.
  };
  const Case cases[] = {
      {"--output-fmt-option reference=" + missing, missing},
      {"--reference " + missing, missing},
      {"--reference " + not_fasta, not_fasta},
      // embed_ref=1 needs the sequences, and none is reachable.
      {"-O cram,embed_ref=1", "reference"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const CommandResult r = Rocksort(absl::StrCat("-v ", c.args, " -o ", out, " ", in));
    EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
    EXPECT_TRUE(absl::StrContains(r.stderr_text, c.named)) << r.stderr_text;
    EXPECT_FALSE(absl::StrContains(r.stderr_text, "temporary database in")) << r.stderr_text;
    EXPECT_FALSE(Exists(out));
    EXPECT_FALSE(Exists(out + ".crai"));
    ExpectNoTempLeftovers();
  }
}

// BGZF SAM (.sam.gz) is indexed as samtools sort --write-index indexes it:
// with --no-PG the data and the CSI are the bytes samtools writes (its
// on-the-fly CSI is not the one `samtools index` makes of the file). Plain
// SAM can't be indexed, and is refused at once (samtools fails after
// sorting).
TEST_F(FormatsTest, WriteIndexForSamAsSamtools) {
  const std::string in = Generate("in.bam", "-n 3000 --seed 37");
  for (const std::string threads : {"-@ 1", "-@ 2"}) {
    SCOPED_TRACE(threads);
    const std::string expected = dir_.File("expected.sam.gz");
    Samtools(absl::StrCat(threads, " --no-PG --write-index -o ", expected, " ", in));
    const std::string out = dir_.File("out.sam.gz");
    const CommandResult r =
        Rocksort(absl::StrCat(threads, " -m 1M --no-PG --write-index -o ", out, " ", in));
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_TRUE(test_util::ReadFileOrDie(out) == test_util::ReadFileOrDie(expected))
        << "SAM.gz differs from samtools'";
    ASSERT_TRUE(Exists(out + ".csi"));
    EXPECT_TRUE(test_util::ReadFileOrDie(out + ".csi") ==
                test_util::ReadFileOrDie(expected + ".csi"))
        << "CSI differs from samtools sort --write-index";
    const CommandResult region = RunCommand("samtools view -c " + out + " chr1:1-5000000");
    EXPECT_EQ(region.exit_code, 0) << region.stderr_text;
    EXPECT_NE(region.stdout_text, "0\n");
  }

  const std::string plain = dir_.File("plain.sam");
  const CommandResult r = Rocksort(absl::StrCat("--write-index -o ", plain, " ", in));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "--write-index")) << r.stderr_text;
  EXPECT_FALSE(Exists(plain));
  ExpectNoTempLeftovers();
}

// FASTQ for a .fq name, as samtools sort writes it; -u/-l for SAM.gz as
// samtools applies them (uncompressed BGZF blocks decompress to the same).
TEST_F(FormatsTest, FastqAndCompressionLevelsAsSamtools) {
  const std::string in = Generate("in.bam", "-n 2000 --seed 38");
  const std::string expected = dir_.File("expected.fq");
  Samtools("-o " + expected + " " + in);
  const std::string out = dir_.File("out.fq");
  CommandResult r = Rocksort(absl::StrCat("-o ", out, " ", in));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_TRUE(test_util::ReadFileOrDie(out) == test_util::ReadFileOrDie(expected));

  const std::string expected_gz = dir_.File("expected.sam.gz");
  Samtools("-u -o " + expected_gz + " " + in);
  const std::string out_gz = dir_.File("out.sam.gz");
  r = Rocksort(absl::StrCat("-u -o ", out_gz, " ", in));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(WithoutLines(RunCommand("gzip -dc " + out_gz).stdout_text, {"@PG\t"}),
            WithoutLines(RunCommand("gzip -dc " + expected_gz).stdout_text, {"@PG\t"}));
  // Level 0: the file is about as large as the text it holds.
  EXPECT_GT(test_util::ReadFileOrDie(out_gz).size(),
            RunCommand("gzip -dc " + out_gz).stdout_text.size());
  ExpectNoTempLeftovers();
}

}  // namespace
}  // namespace rocksort
