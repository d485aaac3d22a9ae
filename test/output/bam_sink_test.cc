#include <memory>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "output/bgzf_writer_internal.h"
#include "output/output.h"
#include "test_util.h"

namespace rocksort::output {
namespace {

using ::rocksort::test_util::ScratchDir;

// A minimal unmapped-style BAM record named `name` at `pos` on tid 0.
std::string Record(const char* name, int32_t pos) {
  std::string r(36, '\0');
  const uint32_t l_name = 2, block = 32 + l_name;
  std::memcpy(&r[0], &block, 4);
  int32_t tid = 0;
  std::memcpy(&r[4], &tid, 4);
  std::memcpy(&r[8], &pos, 4);
  const uint32_t bin_mq_nl = 4680u << 16 | l_name;
  std::memcpy(&r[12], &bin_mq_nl, 4);
  const uint32_t flag_nc = 4u << 16;
  std::memcpy(&r[16], &flag_nc, 4);
  const int32_t minus1 = -1;
  std::memcpy(&r[24], &minus1, 4);
  std::memcpy(&r[28], &minus1, 4);
  r += name;
  r += '\0';
  return r;
}

// Writes `records` through a BAM sink to out.bam.
class BamSinkTest : public ::testing::Test {
 protected:
  absl::Status Write(const std::string& header_text, const std::vector<std::string>& records,
                     const BamSinkOptions& options = BamSinkOptions()) {
    sam_hdr_t* header = sam_hdr_parse(header_text.size(), header_text.c_str());
    const int fd = ::open(out().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    absl::Status status;
    {
      absl::StatusOr<std::unique_ptr<RecordSink>> sink = OpenBamSink(*header, fd, out(), options);
      status = sink.status();
      for (size_t i = 0; status.ok() && i < records.size(); ++i)
        status = (*sink)->Write(records[i]);
      if (status.ok()) status = (*sink)->Finish();
    }
    ::close(fd);
    sam_hdr_destroy(header);
    return status;
  }

  std::string out() const { return dir_.File("out.bam"); }

  ScratchDir dir_;
};

TEST(BamSinkQueue, HoldsTheBytesAskedForInBlocksWithinBounds) {
  EXPECT_EQ(QueueBlocks(0), 4u);
  EXPECT_EQ(QueueBlocks(1964 * 1024), 1964u * 1024 / kBgzfMaxInput);
  EXPECT_EQ(QueueBlocks(4 * 1964 * 1024), 4u * 1964 * 1024 / kBgzfMaxInput);
  EXPECT_EQ(QueueBlocks(size_t{64} << 20), 256u);  // 32 MiB of blocks at most.
}

TEST_F(BamSinkTest, NoRecordsWritesValidBamWithEofBlock) {
  ASSERT_TRUE(Write("@HD\tVN:1.6\tSO:coordinate\n@SQ\tSN:chr1\tLN:1000\n", {}).ok());
  EXPECT_EQ(test_util::RunCommand("samtools quickcheck -v " + out()).exit_code, 0);
  absl::StatusOr<test_util::AlignmentFile> file = test_util::ReadAlignmentFile(out());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->records.empty());
  EXPECT_EQ(file->header_without_pg, "@HD\tVN:1.6\tSO:coordinate\n@SQ\tSN:chr1\tLN:1000");
}

TEST_F(BamSinkTest, RecordsAreWrittenInTheOrderGiven) {
  ASSERT_TRUE(Write("@SQ\tSN:chr1\tLN:1000\n", {Record("b", 20), Record("a", 10)}).ok());
  absl::StatusOr<test_util::AlignmentFile> file = test_util::ReadAlignmentFile(out());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->names, (std::vector<std::string>{"b", "a"}));
}

TEST_F(BamSinkTest, IndexIsTheOneSamtoolsMakes) {
  std::vector<std::string> records;
  for (int i = 0; i < 5000; ++i) records.push_back(Record("r", i * 10));
  BamSinkOptions options;
  options.threads = 2;
  options.index_path = dir_.File("out.bam.csi");
  options.index_name = options.index_path;
  ASSERT_TRUE(Write("@SQ\tSN:chr1\tLN:100000\n", records, options).ok());
  ASSERT_EQ(
      test_util::RunCommand("samtools index -c " + out() + " " + dir_.File("ref.csi")).exit_code, 0);
  EXPECT_TRUE(test_util::ReadFileOrDie(dir_.File("out.bam.csi")) ==
              test_util::ReadFileOrDie(dir_.File("ref.csi")));
}

TEST_F(BamSinkTest, ReferenceTooLongForBamIsRefused) {
  EXPECT_EQ(Write("@SQ\tSN:chr1\tLN:3000000000\n", {}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rocksort::output
