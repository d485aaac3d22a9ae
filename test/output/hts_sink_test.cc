// The htslib sink (OpenSink for SAM, CRAM, FASTQ...) and CheckSink: stored
// records (record::EncodeRecord) in, the text `samtools view` prints for
// the same records in BAM out; CRAM that decodes as htslib's own CRAM of
// the same records; indexes; errors.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/hts_handles.h"
#include "gtest/gtest.h"
#include "htslib/kstring.h"
#include "output/output.h"
#include "record/record.h"
#include "test_util.h"

namespace rocksort::output {
namespace {

using ::rocksort::test_util::RunCommand;
using ::rocksort::test_util::ScratchDir;

constexpr int kRefLength = 200000;

// A reference sequence of kRefLength bases per name, deterministic.
std::string Bases(int seed) {
  std::string s(kRefLength, 'A');
  uint64_t x = 0x9E3779B97F4A7C15ULL + seed;
  for (char& c : s) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = "ACGT"[x % 4];
  }
  return s;
}

// The test's records as SAM lines, in coordinate order: plain, reverse,
// a CIGAR of more than 65535 operations (stored as a CG tag), a huge aux
// array and string, secondary and supplementary, a placed unmapped mate and
// unplaced unmapped reads.
std::vector<std::string> SamLines() {
  std::vector<std::string> lines;
  const std::string bases = Bases(1);
  auto seq = [&](int pos, int len) { return bases.substr(pos - 1, len); };
  lines.push_back(absl::StrCat("r1\t99\tchr1\t100\t60\t10M\t=\t300\t210\t", seq(100, 10),
                               "\tIIIIIIIIII\tNM:i:0\tRG:Z:g1"));
  lines.push_back(absl::StrCat("r2\t0\tchr1\t150\t30\t5S5M\t*\t0\t0\tACGTA", seq(150, 5),
                               "\t*\tXA:Z:chr2,+10,5M,0;\tXF:f:1.5\tXB:B:c,-1,2,-3"));
  lines.push_back(absl::StrCat("r1\t147\tchr1\t300\t60\t10M\t=\t100\t-210\t", seq(300, 10),
                               "\tIIIIIIIIII\tRG:Z:g1"));
  // 70000 operations: "1M1D" alternating, 35000 bases of sequence.
  std::string cigar;
  std::string long_seq;
  int ref = 1000;
  for (int i = 0; i < 35000; ++i) {
    absl::StrAppend(&cigar, "1M1D");
    long_seq += bases[ref - 1];
    ref += 2;
  }
  lines.push_back(
      absl::StrCat("long\t0\tchr1\t1000\t60\t", cigar, "\t*\t0\t0\t", long_seq, "\t*\tNM:i:35000"));
  std::string huge_array = "BI:B:I";
  for (int i = 0; i < 100000; ++i) absl::StrAppend(&huge_array, ",", i * 7);
  lines.push_back(absl::StrCat("huge\t16\tchr1\t2000\t60\t4M\t*\t0\t0\t", seq(2000, 4), "\tABCD\t",
                               huge_array, "\tZZ:Z:", std::string(300000, 'z')));
  lines.push_back(absl::StrCat("sec\t256\tchr1\t5000\t0\t3M\t*\t0\t0\t*\t*"));
  lines.push_back(absl::StrCat("sup\t2048\tchr2\t10\t20\t3H4M\t*\t0\t0\t", seq(10, 4),
                               "\t*\tSA:Z:chr1,5,+,3M4S,60,0;"));
  lines.push_back(absl::StrCat("mate\t73\tchr2\t500\t60\t5M\t=\t500\t0\t", seq(500, 5), "\t*"));
  lines.push_back(absl::StrCat("mate\t133\tchr2\t500\t0\t*\t=\t500\t0\tACGTN\t#####"));
  lines.push_back("unplaced1\t4\t*\t0\t0\t*\t*\t0\t0\tNNNN\t!!!!");
  lines.push_back("unplaced2\t77\t*\t0\t0\t*\t*\t0\t0\t*\t*\tRG:Z:g1");
  return lines;
}

constexpr char kHeaderText[] =
    "@HD\tVN:1.6\tSO:coordinate\n"
    "@SQ\tSN:chr1\tLN:200000\n"
    "@SQ\tSN:chr2\tLN:200000\n"
    "@RG\tID:g1\tSM:s\n";

class HtsSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    header_.reset(sam_hdr_parse(sizeof(kHeaderText) - 1, kHeaderText));
    ASSERT_NE(header_, nullptr);
    for (const std::string& line : SamLines()) {
      RecordPtr b(bam_init1());
      std::string copy = line;  // sam_parse1 may write into the line.
      kstring_t text = {copy.size(), copy.size() + 1, &copy[0]};
      ASSERT_GE(sam_parse1(&text, header_.get(), b.get()), 0) << line.substr(0, 60);
      record::EncodedRecord encoded;
      ASSERT_TRUE(record::EncodeRecord(*b, &encoded).ok());
      std::string bytes;
      encoded.AppendTo(&bytes);
      stored_.push_back(std::move(bytes));
      records_.push_back(std::move(b));
    }
    // The reference for CRAM, with the same bases the records were made of.
    reference_ = dir_.File("ref.fa");
    std::string fasta;
    for (const char* name : {"chr1", "chr2"}) {
      absl::StrAppend(&fasta, ">", name, "\n");
      const std::string bases = Bases(1);
      for (size_t i = 0; i < bases.size(); i += 60)
        absl::StrAppend(&fasta, bases.substr(i, 60), "\n");
    }
    test_util::WriteFileOrDie(reference_, fasta);
    // htslib must never look further (nor on the network).
    setenv("REF_PATH", dir_.File("none/%s").c_str(), 1);
    setenv("REF_CACHE", dir_.File("none/%s").c_str(), 1);
  }

  absl::StatusOr<OutputFormat> Format(const std::string& path, const std::string& format = "",
                                      const std::vector<std::string>& options = {}) {
    OutputFormatRequest r;
    r.path = path;
    r.format = format;
    if (!format.empty()) r.format_origin = "-O " + format;
    for (const std::string& o : options) r.options.push_back({o, o});
    return ResolveOutputFormat(r);
  }

  // Writes the stored records through OpenSink to `path`; the fd is
  // checked to be still open (the caller's) after Finish.
  absl::Status WriteSink(const OutputFormat& format, const std::string& path,
                         const SinkOptions& options = SinkOptions(),
                         uint64_t* bytes_written = nullptr) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return absl::InternalError("can't create " + path);
    absl::Status status;
    {
      absl::StatusOr<std::unique_ptr<RecordSink>> sink =
          OpenSink(format, *header_, fd, path, options);
      status = sink.status();
      for (size_t i = 0; status.ok() && i < stored_.size(); ++i)
        status = (*sink)->Write(stored_[i]);
      if (status.ok()) status = (*sink)->Finish();
      if (status.ok() && bytes_written != nullptr) *bytes_written = (*sink)->bytes_written();
    }
    EXPECT_NE(::fcntl(fd, F_GETFD), -1) << "the sink closed the caller's descriptor";
    ::close(fd);
    return status;
  }

  // Writes the parsed records with htslib itself, as samtools would.
  void WriteWithHtslib(const std::string& path, const char* mode,
                       const std::string& reference = "") {
    HtsFilePtr out(hts_open(path.c_str(), mode));
    ASSERT_NE(out, nullptr);
    if (!reference.empty()) {
      ASSERT_EQ(hts_set_fai_filename(out.get(), reference.c_str()), 0);
    }
    ASSERT_EQ(sam_hdr_write(out.get(), header_.get()), 0);
    for (const RecordPtr& b : records_) ASSERT_GE(sam_write1(out.get(), header_.get(), b.get()), 0);
    ASSERT_EQ(hts_close(out.release()), 0);
  }

  std::string SamtoolsView(const std::string& args) {
    const test_util::CommandResult r = RunCommand("samtools view --no-PG " + args);
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    return r.stdout_text;
  }

  ScratchDir dir_;
  HeaderPtr header_;
  std::vector<RecordPtr> records_;
  std::vector<std::string> stored_;
  std::string reference_;
};

TEST_F(HtsSinkTest, SamIsWhatSamtoolsViewPrintsForTheSameBam) {
  const std::string bam = dir_.File("expected.bam");
  WriteWithHtslib(bam, "wb");
  const std::string expected = SamtoolsView("-h " + bam);
  ASSERT_TRUE(absl::StrContains(expected, std::string(300000, 'z')));
  ASSERT_TRUE(absl::StrContains(expected, "1M1D1M1D"));  // The long CIGAR, restored.
  const absl::StatusOr<OutputFormat> sam = Format(dir_.File("out.sam"));
  ASSERT_TRUE(sam.ok());
  for (int threads : {1, 3}) {
    SCOPED_TRACE(threads);
    SinkOptions options;
    options.threads = threads;
    uint64_t bytes = 0;
    ASSERT_TRUE(WriteSink(*sam, dir_.File("out.sam"), options, &bytes).ok());
    const std::string actual = test_util::ReadFileOrDie(dir_.File("out.sam"));
    EXPECT_TRUE(actual == expected) << "SAM text differs from samtools view";
    EXPECT_EQ(bytes, actual.size());
  }
}

TEST_F(HtsSinkTest, BgzfSamDecompressesToTheSameText) {
  const std::string bam = dir_.File("expected.bam");
  WriteWithHtslib(bam, "wb");
  const std::string expected = SamtoolsView("-h " + bam);
  const absl::StatusOr<OutputFormat> gz = Format(dir_.File("out.sam.gz"));
  ASSERT_TRUE(gz.ok());
  ASSERT_TRUE(gz->bgzf);
  uint64_t bytes = 0;
  ASSERT_TRUE(WriteSink(*gz, dir_.File("out.sam.gz"), SinkOptions(), &bytes).ok());
  const test_util::CommandResult text = RunCommand("gzip -dc " + dir_.File("out.sam.gz"));
  ASSERT_EQ(text.exit_code, 0) << text.stderr_text;
  EXPECT_TRUE(text.stdout_text == expected);
  EXPECT_EQ(bytes, test_util::ReadFileOrDie(dir_.File("out.sam.gz")).size());
}

// CRAM from the sink decodes to what htslib's own CRAM of the same records
// decodes to, with the same reference.
TEST_F(HtsSinkTest, CramDecodesAsHtslibsOwnCram) {
  const std::string expected_cram = dir_.File("expected.cram");
  WriteWithHtslib(expected_cram, "wc", reference_);
  const std::string expected = SamtoolsView("-h -T " + reference_ + " " + expected_cram);
  const absl::StatusOr<OutputFormat> cram =
      Format(dir_.File("out.cram"), "", {"reference=" + reference_});
  ASSERT_TRUE(cram.ok());
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    SinkOptions options;
    options.threads = threads;
    ASSERT_TRUE(WriteSink(*cram, dir_.File("out.cram"), options).ok());
    EXPECT_EQ(RunCommand("samtools quickcheck " + dir_.File("out.cram")).exit_code, 0);
    EXPECT_EQ(SamtoolsView("-h -T " + reference_ + " " + dir_.File("out.cram")), expected);
  }
}

TEST_F(HtsSinkTest, CramIndexAnswersRegionQueries) {
  const absl::StatusOr<OutputFormat> cram =
      Format(dir_.File("out.cram"), "", {"reference=" + reference_});
  ASSERT_TRUE(cram.ok());
  SinkOptions options;
  options.index_path = dir_.File("partial.crai");
  options.index_name = dir_.File("out.cram.crai");
  ASSERT_TRUE(WriteSink(*cram, dir_.File("out.cram"), options).ok());
  const std::string view = absl::StrCat("-T ", reference_, " -X ", dir_.File("out.cram"), " ",
                                        dir_.File("partial.crai"), " ");
  EXPECT_EQ(SamtoolsView(view + "chr1:1000-1000 | cut -f1"), "long\n");
  EXPECT_EQ(SamtoolsView(view + "chr2 | cut -f1"), "sup\nmate\nmate\n");
  ASSERT_EQ(
      RunCommand(absl::StrCat("samtools index ", dir_.File("out.cram"), " ", dir_.File("ref.crai")))
          .exit_code,
      0);
  EXPECT_EQ(RunCommand("gzip -dc " + dir_.File("partial.crai")).stdout_text,
            RunCommand("gzip -dc " + dir_.File("ref.crai")).stdout_text);
}

TEST_F(HtsSinkTest, BgzfSamIndexIsACsiSamtoolsCanUse) {
  const absl::StatusOr<OutputFormat> gz = Format(dir_.File("out.sam.gz"));
  ASSERT_TRUE(gz.ok());
  SinkOptions options;
  options.index_path = dir_.File("out.sam.gz.csi");
  options.index_name = options.index_path;
  ASSERT_TRUE(WriteSink(*gz, dir_.File("out.sam.gz"), options).ok());
  EXPECT_EQ(SamtoolsView(dir_.File("out.sam.gz") + " chr1:2000-2001 | cut -f1"), "long\nhuge\n");
}

TEST_F(HtsSinkTest, FastqIsWhatHtslibWrites) {
  const std::string expected_path = dir_.File("expected.fq");
  WriteWithHtslib(expected_path, "wf");
  const absl::StatusOr<OutputFormat> fq = Format(dir_.File("out.fq"));
  ASSERT_TRUE(fq.ok());
  ASSERT_EQ(fq->kind, OutputKind::kFastq);
  ASSERT_TRUE(WriteSink(*fq, dir_.File("out.fq")).ok());
  EXPECT_TRUE(test_util::ReadFileOrDie(dir_.File("out.fq")) == test_util::ReadFileOrDie(expected_path));
}

TEST_F(HtsSinkTest, BamGoesToTheZeroCopySink) {
  const absl::StatusOr<OutputFormat> bam = Format(dir_.File("out.bam"), "", {"level=1"});
  ASSERT_TRUE(bam.ok());
  ASSERT_TRUE(WriteSink(*bam, dir_.File("out.bam")).ok());
  const std::string expected = dir_.File("expected.bam");
  WriteWithHtslib(expected, "wb");
  absl::StatusOr<std::string> mine = test_util::ReadBamRecordBytes(dir_.File("out.bam"));
  absl::StatusOr<std::string> theirs = test_util::ReadBamRecordBytes(expected);
  ASSERT_TRUE(mine.ok() && theirs.ok());
  EXPECT_TRUE(*mine == *theirs);
}

TEST_F(HtsSinkTest, AFailedCloseIsAFailedRun) {
  const absl::StatusOr<OutputFormat> sam = Format("out.sam");
  ASSERT_TRUE(sam.ok());
  const int fd = ::open("/dev/full", O_WRONLY);
  if (fd < 0) GTEST_SKIP() << "no /dev/full";
  absl::Status status;
  {
    absl::StatusOr<std::unique_ptr<RecordSink>> sink = OpenSink(*sam, *header_, fd, "full.sam", {});
    status = sink.status();
    // The header and records fit htslib's buffer: the error comes at the end.
    for (size_t i = 0; status.ok() && i < 2; ++i) status = (*sink)->Write(stored_[i]);
    if (status.ok()) status = (*sink)->Finish();
  }
  ::close(fd);
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(absl::StrContains(status.message(), "full.sam")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "No space left")) << status;
}

TEST_F(HtsSinkTest, CheckSinkRefusesAReferenceThatCannotBeLoaded) {
  const std::string missing = dir_.File("missing.fa");
  absl::StatusOr<OutputFormat> cram = Format("out.cram", "", {"reference=" + missing});
  ASSERT_TRUE(cram.ok());
  absl::Status s = CheckSink(*cram, *header_, "out.cram", false);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), missing)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "out.cram")) << s;

  const std::string not_fasta = dir_.File("not.fa");
  test_util::WriteFileOrDie(not_fasta, "this is not FASTA\n");
  cram = Format("out.cram", "", {"reference=" + not_fasta});
  ASSERT_TRUE(cram.ok());
  s = CheckSink(*cram, *header_, "out.cram", false);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), not_fasta)) << s;

  // embed_ref=1 needs the sequences; htslib finds none.
  cram = Format("out.cram", "", {"embed_ref=1"});
  ASSERT_TRUE(cram.ok());
  s = CheckSink(*cram, *header_, "out.cram", false);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "reference")) << s;

  cram = Format("out.cram", "", {"reference=" + reference_, "version=3.0"});
  ASSERT_TRUE(cram.ok());
  EXPECT_TRUE(CheckSink(*cram, *header_, "out.cram", true).ok());
  // An option htslib refuses when applied.
  cram = Format("out.cram", "", {"version=9.9"});
  ASSERT_TRUE(cram.ok());
  s = CheckSink(*cram, *header_, "out.cram", false);
  EXPECT_TRUE(absl::StrContains(s.message(), "version=9.9")) << s;
}

TEST_F(HtsSinkTest, IndexIsRefusedWhereSamtoolsCannotMakeOne) {
  for (const char* name : {"out.sam", "out.fq", "out.fa.gz"}) {
    SCOPED_TRACE(name);
    const absl::StatusOr<OutputFormat> f = Format(name);
    ASSERT_TRUE(f.ok());
    const absl::Status s = CheckSink(*f, *header_, name, true);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "--write-index")) << s;
    EXPECT_TRUE(CheckSink(*f, *header_, name, false).ok());
    SinkOptions options;
    options.index_path = dir_.File("x.csi");
    options.index_name = options.index_path;
    EXPECT_FALSE(WriteSink(*f, dir_.File(name), options).ok());
  }
}

}  // namespace
}  // namespace rocksort::output
