// End-to-end: several inputs in one sort, against Debian's samtools as the
// oracle. The records must be those of `samtools cat` then `samtools sort`
// (equal keys keep file order, then record order); the header must be what
// `samtools merge` makes of the inputs' headers (@PG lines aside), with the
// sort order's @HD. SAM, BAM and CRAM inputs mix, one of them from stdin,
// or listed with -b. Bad inputs fail before anything is written, naming
// the input, and leave nothing behind.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace rocksort {
namespace {

using test_util::CommandResult;
using test_util::RunCommand;
using test_util::ScratchDir;

// The header lines of `file` other than @HD (Debian's samtools 1.16 writes
// no SS field in a name-sorted @HD; rocksort follows samtools 1.23.1).
std::string HeaderWithoutHd(const test_util::AlignmentFile& file) {
  std::vector<absl::string_view> kept;
  for (absl::string_view line : absl::StrSplit(file.header_without_pg, '\n')) {
    if (!absl::StartsWith(line, "@HD\t")) kept.push_back(line);
  }
  return absl::StrJoin(kept, "\n");
}

class InputsTest : public ::testing::Test {
 protected:
  // htslib must find references only where a test says (never on the network).
  std::string Env() const { return test_util::NoReferenceLookupEnv(dir_); }

  // Runs `command` (with Env()), expecting success.
  std::string Run(const std::string& command) {
    const CommandResult r = RunCommand(Env() + command);
    EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.stderr_text;
    return r.stdout_text;
  }

  // A gen_reads SAM file whose read group is `rg` (gen_reads names every
  // read group SIM.1): distinct read groups keep records as they are.
  std::string GenerateSam(const std::string& name, const std::string& args,
                          const std::string& rg = "SIM.1") {
    const std::string path = dir_.File(name);
    Run(absl::StrCat(test_util::GenReadsBinary(), " ", args, " -o ", path));
    if (rg != "SIM.1") {
      test_util::WriteFileOrDie(path, absl::StrReplaceAll(test_util::ReadFileOrDie(path),
                                                          {{"\tID:SIM.1\t", "\tID:" + rg + "\t"},
                                                           {"\tRG:Z:SIM.1", "\tRG:Z:" + rg}}));
    }
    return path;
  }

  // `sam` as BAM (`format` "-b") or CRAM ("-C", with reference_).
  std::string Convert(const std::string& sam, const std::string& name, const std::string& format) {
    const std::string path = dir_.File(name);
    Run(absl::StrCat("samtools view --no-PG ", format, " ",
                     format == "-C" ? "-T " + reference_ + " " : "", "-o ", path, " ", sam));
    return path;
  }

  // A FASTA with the @SQ names and lengths of `alignments`, for CRAM.
  void MakeReference(const std::string& alignments) {
    const std::string fasta = test_util::FastaForHeader(Run("samtools view -H " + alignments));
    reference_ = dir_.File("ref.fa");
    test_util::WriteFileOrDie(reference_, fasta);
    Run("samtools faidx " + reference_);
  }

  // What `samtools merge -s 0` makes of the inputs' headers (rocksort's
  // renamed IDs are those of seed 0), as SAM header text.
  std::string MergedHeader(const std::vector<std::string>& inputs) {
    std::vector<std::string> headers;
    for (const std::string& in : inputs) {
      headers.push_back(dir_.File(absl::StrCat("header", headers.size(), ".sam")));
      Run(absl::StrCat("samtools view -H --no-PG -o ", headers.back(), " ", in));
    }
    return Run(
        absl::StrCat("samtools merge --no-PG -s 0 -O sam -o - ", absl::StrJoin(headers, " ")));
  }

  // The oracle for the records: the inputs concatenated (the merged header,
  // then every input's records in order), sorted by samtools with `order`.
  std::string CatThenSort(const std::vector<std::string>& inputs, const std::string& order) {
    std::string text = MergedHeader(inputs);
    for (const std::string& in : inputs) {
      text += Run(absl::StrCat("samtools view --no-PG -T ", reference_, " ", in));
    }
    const std::string cat = dir_.File("cat.sam");
    test_util::WriteFileOrDie(cat, text);
    const std::string expected = dir_.File("expected.bam");
    Run(absl::StrCat("samtools sort --no-PG ", order, " -o ", expected, " ", cat));
    return expected;
  }

  CommandResult Rocksort(const std::string& args) {
    return RunCommand(absl::StrCat(Env(), test_util::RocksortBinary(), " ", args));
  }

  // Records and header as the oracle's (the header without @HD for -n).
  void ExpectSame(const std::string& expected, const std::string& actual,
                  const std::string& order) {
    if (order.empty()) {
      EXPECT_EQ(test_util::CompareAlignmentFiles(expected, actual), "");
      return;
    }
    absl::StatusOr<test_util::AlignmentFile> e = test_util::ReadAlignmentFile(expected);
    absl::StatusOr<test_util::AlignmentFile> a = test_util::ReadAlignmentFile(actual);
    ASSERT_TRUE(e.ok() && a.ok());
    EXPECT_EQ(HeaderWithoutHd(*e), HeaderWithoutHd(*a));
    ASSERT_EQ(e->records.size(), a->records.size());
    for (size_t i = 0; i < e->records.size(); ++i) {
      ASSERT_TRUE(e->records[i] == a->records[i])
          << "record " << i << ": expected " << e->names[i] << ", got " << a->names[i];
    }
  }

  // No temporary directory or partial output left in dir_.
  // The @HD and @SQ lines of SAM file `sam` into *header and its records,
  // without their RG tags, into *records: pieces of it sorted as several
  // inputs then have no read groups or programs for the header merge to
  // rename, and samtools sorting the whole file is their oracle.
  static void SplitWithoutReadGroups(const std::string& sam, std::string* header,
                                     std::vector<std::string>* records) {
    for (absl::string_view line : absl::StrSplit(test_util::ReadFileOrDie(sam), '\n')) {
      if (line.empty()) continue;
      if (absl::StartsWith(line, "@HD") || absl::StartsWith(line, "@SQ")) {
        absl::StrAppend(header, line, "\n");
      } else if (!absl::StartsWith(line, "@")) {
        records->push_back(absl::StrReplaceAll(line, {{"\tRG:Z:SIM.1", ""}}));
      }
    }
  }

  void ExpectNoTempLeftovers() {
    for (const std::string& name : dir_.List()) {
      EXPECT_EQ(name.find("rocksort."), std::string::npos) << "left behind: " << name;
      EXPECT_EQ(name.find(".partial."), std::string::npos) << "left behind: " << name;
    }
  }

  // A failed run: exit 1, one message naming `culprit`, no output, no
  // temporary data.
  void ExpectFailureNaming(const std::string& args, const std::string& culprit,
                           const std::string& output) {
    SCOPED_TRACE(args);
    const CommandResult r = Rocksort(args);
    EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
    EXPECT_TRUE(absl::StrContains(r.stderr_text, culprit)) << r.stderr_text;
    EXPECT_FALSE(std::filesystem::exists(output));
    ExpectNoTempLeftovers();
  }

  // Three inputs with the same references and distinct read groups, as
  // BAM, SAM and CRAM; `seed` varies the reads.
  std::vector<std::string> MixedInputs(int pairs) {
    const std::string args = absl::StrCat("-n ", pairs, " --refs 3 --genome-length 300K");
    const std::string a = GenerateSam("a.sam", args + " --seed 51 --tie-frac 0.3", "L1");
    const std::string b = GenerateSam("b.sam", args + " --seed 52 --tie-frac 0.3", "L2");
    const std::string c = GenerateSam("c.sam", args + " --seed 53", "L3");
    MakeReference(a);
    return {Convert(a, "a.bam", "-b"), b, Convert(c, "c.cram", "-C")};
  }

  ScratchDir dir_;
  std::string reference_;
};

// BAM, SAM from stdin and CRAM, in coordinate and name order, with the
// default memory and with many small runs merged (-m 1M -@ 2).
TEST_F(InputsTest, MixedInputsOneFromStdinMatchCatThenSort) {
  const std::vector<std::string> in = MixedInputs(4000);
  const std::string out = dir_.File("out.bam");
  for (const std::string order : {"", "-n"}) {
    const std::string expected = CatThenSort(in, order);
    for (const std::string extra : {"", "-m 1M -@ 2"}) {
      const std::string args = absl::StrCat(order, " ", extra, " --reference ", reference_, " -o ",
                                            out, " ", in[0], " - ", in[2], " < ", in[1]);
      SCOPED_TRACE(args);
      const CommandResult r = Rocksort(args);
      ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
      EXPECT_EQ(r.stderr_text, "");
      ExpectSame(expected, out, order);
      ExpectNoTempLeftovers();
    }
  }
}

// Two inputs, and the order of the inputs decides ties: swapping them is
// sorting the other concatenation.
TEST_F(InputsTest, TwoInputsInEitherOrderMatchCatThenSort) {
  const std::vector<std::string> in = MixedInputs(1500);
  const std::string out = dir_.File("out.sam");
  for (const std::vector<std::string>& pair :
       std::vector<std::vector<std::string>>{{in[0], in[1]}, {in[1], in[0]}}) {
    const std::string expected = CatThenSort(pair, "");
    const CommandResult r = Rocksort(absl::StrCat("-o ", out, " ", pair[0], " ", pair[1]));
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    ExpectSame(expected, out, "");
  }
}

// -b lists inputs before those on the command line, as samtools merge.
TEST_F(InputsTest, InputListMatchesTheSameInputsGivenAsArguments) {
  const std::vector<std::string> in = MixedInputs(1500);
  const std::string expected = CatThenSort(in, "");
  const std::string list = dir_.File("inputs.txt");
  test_util::WriteFileOrDie(list, absl::StrCat(in[0], "\n", in[1], "\n"));
  const std::string out = dir_.File("out.bam");
  const CommandResult r =
      Rocksort(absl::StrCat("--reference ", reference_, " -b ", list, " -o ", out, " ", in[2]));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  ExpectSame(expected, out, "");
  ExpectNoTempLeftovers();
}

// 300 inputs under an open-file limit of 128: each waits closed until its
// turn, so neither the inputs nor the runs beside them run out of
// descriptors (with every input open, this failed with "Too many open
// files"). The inputs are pieces of one SAM file with one header and no
// read groups, so the oracle is samtools sorting that file.
TEST_F(InputsTest, ManyInputsUnderALowOpenFileLimitMatchSamtools) {
  const std::string whole =
      GenerateSam("whole.sam", "-n 6000 --refs 3 --genome-length 300K --seed 54");
  std::string header;
  std::vector<std::string> records;
  SplitWithoutReadGroups(whole, &header, &records);
  constexpr int kInputs = 300;
  std::string all = header;
  std::string list;
  for (int i = 0; i < kInputs; ++i) {
    std::string text = header;
    for (size_t r = i; r < records.size(); r += kInputs) absl::StrAppend(&text, records[r], "\n");
    const std::string piece = dir_.File(absl::StrCat("piece", i, ".sam"));
    test_util::WriteFileOrDie(piece, text);
    absl::StrAppend(&all, text.substr(header.size()));
    absl::StrAppend(&list, piece, "\n");
  }
  const std::string cat = dir_.File("cat.sam");
  test_util::WriteFileOrDie(cat, all);
  test_util::WriteFileOrDie(dir_.File("inputs.txt"), list);
  const std::string expected = dir_.File("expected.bam");
  Run(absl::StrCat("samtools sort --no-PG -o ", expected, " ", cat));
  const std::string out = dir_.File("out.bam");
  for (const std::string extra : {"", "-m 1M -@ 2"}) {
    SCOPED_TRACE(extra);
    const CommandResult r =
        RunCommand(absl::StrCat("ulimit -n 128 && ", Env(), test_util::RocksortBinary(), " ", extra,
                                " -b ", dir_.File("inputs.txt"), " -o ", out));
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_EQ(test_util::CompareAlignmentFiles(expected, out), "");
    ExpectNoTempLeftovers();
  }
}

// FIFO inputs can't be closed and opened again, so 100 of them hold 100
// descriptors all through the load, beside the runs RocksDB keeps open.
// Under a limit of 150 the store is planned with what they leave (before,
// with the whole limit, a flush failed with "Too many open files" once ~30
// runs were open); under 130, too few are left and the sort fails at once
// with a message, leaving nothing. The first FIFO carries nearly all the
// records, so the runs pile up while the other 99 are open.
TEST_F(InputsTest, FifoInputsLeaveTheStoreWhatTheyDoNotHold) {
  const std::string whole =
      GenerateSam("whole.sam", "-n 40000 --refs 3 --genome-length 1M --seed 55");
  std::string header, body;
  std::vector<std::string> records;
  SplitWithoutReadGroups(whole, &header, &records);
  constexpr int kFifos = 100;
  ASSERT_GT(records.size(), size_t{kFifos});
  std::vector<std::string> pieces(kFifos, header);
  const size_t small_from = records.size() - (kFifos - 1);
  for (size_t r = 0; r < records.size(); ++r) {
    const size_t piece = r < small_from ? 0 : r - small_from + 1;
    absl::StrAppend(&pieces[piece], records[r], "\n");
    absl::StrAppend(&body, records[r], "\n");
  }
  std::string feed, fifos;
  for (int i = 0; i < kFifos; ++i) {
    const std::string piece = dir_.File(absl::StrCat("piece", i, ".sam"));
    const std::string fifo = dir_.File(absl::StrCat("fifo", i));
    test_util::WriteFileOrDie(piece, pieces[i]);
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << fifo;
    // The timeout runs from before the writer opens its FIFO, so a writer
    // whose FIFO the sort never opens (it failed first) gives up within it
    // and the final `wait` returns.
    absl::StrAppend(&feed, "timeout 300 sh -c 'exec cat ", piece, " >", fifo, "' & ");
    absl::StrAppend(&fifos, " ", fifo);
  }
  const std::string cat = dir_.File("cat.sam");
  test_util::WriteFileOrDie(cat, header + body);
  const std::string expected = dir_.File("expected.bam");
  Run(absl::StrCat("samtools sort --no-PG -o ", expected, " ", cat));
  const std::string out = dir_.File("out.bam");
  auto sort_under = [&](int limit) {
    return RunCommand(absl::StrCat("ulimit -n ", limit, " || exit 99; ", feed, Env(),
                                   test_util::RocksortBinary(), " -m 1M -o ", out, fifos,
                                   "; rc=$?; wait; exit $rc"));
  };
  const CommandResult sorted = sort_under(150);
  ASSERT_EQ(sorted.exit_code, 0) << sorted.stderr_text;
  EXPECT_EQ(test_util::CompareAlignmentFiles(expected, out), "");
  ExpectNoTempLeftovers();
  ASSERT_EQ(std::remove(out.c_str()), 0);

  const CommandResult refused = sort_under(130);
  EXPECT_EQ(refused.exit_code, 1) << refused.stderr_text;
  EXPECT_TRUE(absl::StrContains(refused.stderr_text, "too many open files")) << refused.stderr_text;
  EXPECT_TRUE(absl::StrContains(refused.stderr_text, "of the open-file limit of 130 are open"))
      << refused.stderr_text;
  EXPECT_FALSE(std::filesystem::exists(out));
  ExpectNoTempLeftovers();
}

// gen_reads names every read group SIM.1 and every program gen_reads: as
// samtools merge, later inputs' IDs get suffixes, and their records the
// renamed read group. The oracle is samtools merge (-s 0) of the inputs
// each sorted by samtools.
TEST_F(InputsTest, CollidingReadGroupsAreRenamedAsSamtoolsMerge) {
  const std::string args = "-n 3000 --refs 3 --genome-length 300K --tie-frac 0.3";
  const std::vector<std::string> in = {
      Convert(GenerateSam("x.sam", args + " --seed 61"), "x.bam", "-b"),
      GenerateSam("y.sam", args + " --seed 62"),
      Convert(GenerateSam("z.sam", args + " --seed 63"), "z.bam", "-b")};
  std::vector<std::string> sorted;
  for (const std::string& path : in) {
    sorted.push_back(path + ".sorted.bam");
    Run(absl::StrCat("samtools sort --no-PG -o ", sorted.back(), " ", path));
  }
  // Debian's samtools 1.16 writes the suffix without leading zeros
  // ("%0lX"); samtools 1.23.1, which rocksort follows, pads it to 8 digits
  // ("%08lX"): the third suffix of seed 0, 0C55E80A, tells them apart.
  const std::string merged = dir_.File("merged.bam");
  Run(absl::StrCat("samtools merge --no-PG -s 0 -o ", merged, " ", absl::StrJoin(sorted, " ")));
  const std::string expected = dir_.File("expected.bam");
  Run(absl::StrCat(
      "samtools view --no-PG -h ", merged,
      R"( | sed -E 's/(SIM\.1-)([0-9A-F]{7})\b/\10\2/g' | samtools view --no-PG -b -o )", expected,
      " -"));
  ASSERT_TRUE(absl::StrContains(Run("samtools view -H " + expected), "@RG\tID:SIM.1-0C55E80A"));

  const std::string out = dir_.File("out.bam");
  const CommandResult r =
      Rocksort(absl::StrCat("-m 1M -@ 2 -o ", out, " ", absl::StrJoin(in, " ")));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  ExpectSame(expected, out, "");
  ExpectNoTempLeftovers();
}

TEST_F(InputsTest, BadInputsFailNamingTheInputAndWriteNothing) {
  const std::string args = "-n 200 --refs 3 --genome-length 300K";
  const std::string a = GenerateSam("a.sam", args + " --seed 71");
  const std::string b = GenerateSam("b.sam", args + " --seed 72");
  const std::string out = dir_.File("out.bam");
  const std::string missing = dir_.File("missing.bam");
  ExpectFailureNaming(absl::StrCat("-o ", out, " ", a, " ", missing), missing, out);

  const std::string junk = dir_.File("junk.bin");
  test_util::WriteFileOrDie(junk, std::string("\x01\x02\x03 not an alignment file\n", 26));
  ExpectFailureNaming(absl::StrCat("-o ", out, " ", a, " ", junk), junk, out);
  const std::string fasta = dir_.File("reads.fa");
  test_util::WriteFileOrDie(fasta, ">r1\nACGTACGT\n");
  ExpectFailureNaming(absl::StrCat("-o ", out, " ", fasta, " ", a), fasta, out);

  // Other references: the message names the input and its first @SQ line
  // that differs.
  const std::string other = GenerateSam("other.sam", "-n 200 --refs 2 --genome-length 300K");
  ExpectFailureNaming(absl::StrCat("-o ", out, " ", a, " ", b, " ", other), other, out);
  const CommandResult r = Rocksort(absl::StrCat("-o ", out, " ", a, " ", other));
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "@SQ")) << r.stderr_text;

  ExpectFailureNaming(absl::StrCat("-o ", out, " - ", a, " - < ", b), "stdin", out);
  const std::string empty_list = dir_.File("empty.txt");
  test_util::WriteFileOrDie(empty_list, "\n");
  ExpectFailureNaming(absl::StrCat("-b ", empty_list, " -o ", out), empty_list, out);
  const std::string no_list = dir_.File("no-such-list.txt");
  ExpectFailureNaming(absl::StrCat("-b ", no_list, " -o ", out, " ", a), no_list, out);
  // A -b list naming a missing file.
  const std::string list = dir_.File("list.txt");
  test_util::WriteFileOrDie(list, absl::StrCat(a, "\n", missing, "\n"));
  ExpectFailureNaming(absl::StrCat("-b ", list, " -o ", out), missing, out);
}

}  // namespace
}  // namespace rocksort
