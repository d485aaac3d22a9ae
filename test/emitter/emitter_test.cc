#include "emitter/emitter.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "emitter/bgzf_writer.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "test_util.h"

namespace rocksort::emitter {
namespace {

using ::rocksort::testing::ScratchDir;

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

// A fresh DB in a scratch directory, and EmitBam of it to out.bam.
class EmitterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir_.File("db"), &raw).ok());
    db_.reset(raw);
  }

  absl::StatusOr<EmitStats> Emit(const std::string& header_text,
                                 const EmitOptions& options = EmitOptions()) {
    sam_hdr_t* header = sam_hdr_parse(header_text.size(), header_text.c_str());
    const int fd = ::open(out().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    absl::StatusOr<EmitStats> stats = EmitBam(db_.get(), *header, fd, out(), options);
    ::close(fd);
    sam_hdr_destroy(header);
    return stats;
  }

  std::string out() const { return dir_.File("out.bam"); }

  ScratchDir dir_;
  std::unique_ptr<rocksdb::DB> db_;
};

TEST(EmitterQueue, HoldsAboutOneReadaheadPerTwoThreads) {
  EmitOptions options;
  options.threads = 2;
  options.readahead = 0;
  EXPECT_EQ(QueueBlocks(options), 4u);
  options.readahead = 1964 * 1024;  // hdd profile: one block per 64 KiB read.
  EXPECT_EQ(QueueBlocks(options), 1964u * 1024 / kBgzfMaxInput);
  options.threads = 8;
  EXPECT_EQ(QueueBlocks(options), 4u * 1964 * 1024 / kBgzfMaxInput);
  options.readahead = size_t{16} << 20;
  EXPECT_EQ(QueueBlocks(options), 256u);  // 32 MiB of blocks at most.
}

TEST_F(EmitterTest, EmptyInputWritesValidBamWithEofBlock) {
  absl::StatusOr<EmitStats> stats = Emit("@HD\tVN:1.6\tSO:coordinate\n@SQ\tSN:chr1\tLN:1000\n");
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->records, 0u);
  EXPECT_EQ(testing::RunCommand("samtools quickcheck -v " + out()).exit_code, 0);
  absl::StatusOr<testing::AlignmentFile> file = testing::ReadAlignmentFile(out());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->records.empty());
  EXPECT_EQ(file->header_without_pg, "@HD\tVN:1.6\tSO:coordinate\n@SQ\tSN:chr1\tLN:1000");
}

TEST_F(EmitterTest, ValuesAreWrittenInKeyOrder) {
  // Values are BAM records; keys decide the order. Write "b" then "a" with
  // keys that put "a" first.
  ASSERT_TRUE(db_->Put(rocksdb::WriteOptions(), "k2", Record("b", 20)).ok());
  ASSERT_TRUE(db_->Put(rocksdb::WriteOptions(), "k1", Record("a", 10)).ok());
  absl::StatusOr<EmitStats> stats = Emit("@SQ\tSN:chr1\tLN:1000\n");
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->records, 2u);
  absl::StatusOr<testing::AlignmentFile> file = testing::ReadAlignmentFile(out());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->names, (std::vector<std::string>{"a", "b"}));
}


TEST_F(EmitterTest, LanesAreMergedInKeyOrder) {
  // Three lanes whose keys interleave; one of them ends first, one is empty.
  rocksdb::ColumnFamilyHandle* lane1 = nullptr;
  rocksdb::ColumnFamilyHandle* lane2 = nullptr;
  ASSERT_TRUE(db_->CreateColumnFamily(rocksdb::ColumnFamilyOptions(), "lane1", &lane1).ok());
  ASSERT_TRUE(db_->CreateColumnFamily(rocksdb::ColumnFamilyOptions(), "lane2", &lane2).ok());
  const rocksdb::WriteOptions w;
  ASSERT_TRUE(db_->Put(w, "k1", Record("a", 10)).ok());
  ASSERT_TRUE(db_->Put(w, lane1, "k2", Record("b", 20)).ok());
  ASSERT_TRUE(db_->Put(w, lane1, "k3", Record("c", 30)).ok());
  ASSERT_TRUE(db_->Put(w, "k4", Record("d", 40)).ok());
  ASSERT_TRUE(db_->Put(w, "k5", Record("e", 50)).ok());
  EmitOptions options;
  options.lanes = {db_->DefaultColumnFamily(), lane1, lane2};
  absl::StatusOr<EmitStats> stats = Emit("@SQ\tSN:chr1\tLN:1000\n", options);
  ASSERT_TRUE(db_->DestroyColumnFamilyHandle(lane1).ok());
  ASSERT_TRUE(db_->DestroyColumnFamilyHandle(lane2).ok());
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->records, 5u);
  absl::StatusOr<testing::AlignmentFile> file = testing::ReadAlignmentFile(out());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->names, (std::vector<std::string>{"a", "b", "c", "d", "e"}));
}

}  // namespace
}  // namespace rocksort::emitter
