#include "loader/loader.h"

#include <unistd.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "htslib/bgzf.h"
#include "keycodec/keycodec.h"
#include "rocksdb/db.h"
#include "test_util.h"

namespace rocksort::loader {
namespace {

using ::rocksort::testing::ScratchDir;

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir_.File("db"), &db).ok());
    db_.reset(db);
  }
  void TearDown() override { db_.reset(); }

  std::string WriteSam(const std::string& body) {
    const std::string path = dir_.File("in.sam");
    testing::WriteFileOrDie(path, "@HD\tVN:1.6\n@SQ\tSN:c1\tLN:1000\n@SQ\tSN:c2\tLN:1000\n" + body);
    return path;
  }

  ScratchDir dir_;
  std::unique_ptr<rocksdb::DB> db_;
};

TEST_F(LoaderTest, WritesEveryRecordUnderItsCoordinateKey) {
  const std::string path = WriteSam(
      "a\t0\tc2\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n"
      "b\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\tIIII\n"
      "c\t16\tc1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n"
      "d\t0\tc1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n");
  absl::StatusOr<std::unique_ptr<Input>> input = Input::Open(path, 1);
  ASSERT_TRUE(input.ok()) << input.status();
  absl::StatusOr<LoadStats> stats = LoadRecords(**input, db_.get(), LoadOptions());
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->records, 4u);

  std::vector<std::string> names;
  uint64_t bytes = 0;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    ASSERT_TRUE(keycodec::DecodeCoordinateKey(it->key().ToString()).ok());
    // The value is a BAM record: block_size, 32 bytes of fields, then the name.
    names.push_back(std::string(it->value().data() + 36));
    bytes += it->value().size();
  }
  // c1:10 forward (d) before reverse (c), then c2, then unmapped.
  EXPECT_EQ(names, (std::vector<std::string>{"d", "c", "a", "b"}));
  EXPECT_EQ(stats->record_bytes, bytes);
}

TEST_F(LoaderTest, MalformedSamLineIsDataLossNamingFileAndRecord) {
  const std::string path = WriteSam(
      "a\t0\tc1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n"
      "b\t0\tc1\tnot-a-number\t60\t4M\t*\t0\t0\tACGT\tIIII\n");
  absl::StatusOr<std::unique_ptr<Input>> input = Input::Open(path, 1);
  ASSERT_TRUE(input.ok()) << input.status();
  absl::StatusOr<LoadStats> stats = LoadRecords(**input, db_.get(), LoadOptions());
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(stats.status().message().find(path), std::string::npos) << stats.status();
  EXPECT_NE(stats.status().message().find("record 2"), std::string::npos) << stats.status();
}

TEST_F(LoaderTest, MissingInputIsNotFound) {
  absl::StatusOr<std::unique_ptr<Input>> input = Input::Open(dir_.File("nope.bam"), 1);
  ASSERT_FALSE(input.ok());
  EXPECT_EQ(input.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(input.status().message().find("nope.bam"), std::string::npos);
}

TEST_F(LoaderTest, CancelledFlagStopsLoading) {
  std::string body;
  for (int i = 0; i < 2000; ++i) body += "r\t0\tc1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n";
  absl::StatusOr<std::unique_ptr<Input>> input = Input::Open(WriteSam(body), 1);
  ASSERT_TRUE(input.ok());
  std::atomic<bool> cancelled{true};
  LoadOptions options;
  options.batch_bytes = 1024;
  options.cancelled = &cancelled;
  EXPECT_EQ(LoadRecords(**input, db_.get(), options).status().code(),
            absl::StatusCode::kCancelled);
}


TEST(LoaderLanes, RunsAlternateBetweenLanes) {
  // Two column families with small memtables: every time RocksDB seals the
  // filling lane's memtable, the loader moves to the other lane.
  ScratchDir dir;
  rocksdb::Options options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  options.write_buffer_size = 64 << 10;
  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, options}, {"lane1", options}};
  std::vector<rocksdb::ColumnFamilyHandle*> lanes;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, dir.File("db"), families, &lanes, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);

  std::string body = "@HD\tVN:1.6\n@SQ\tSN:c1\tLN:100000\n";
  constexpr int kRecords = 6000;
  for (int i = 0; i < kRecords; ++i) {
    body += absl::StrCat("r", i, "\t0\tc1\t", 1 + (i * 7919) % 90000,
                         "\t60\t8M\t*\t0\t0\tACGTACGT\tIIIIIIII\n");
  }
  testing::WriteFileOrDie(dir.File("in.sam"), body);
  absl::StatusOr<std::unique_ptr<Input>> input = Input::Open(dir.File("in.sam"), 1);
  ASSERT_TRUE(input.ok()) << input.status();
  LoadOptions load;
  load.batch_bytes = 2 << 10;
  load.lanes = lanes;
  absl::StatusOr<LoadStats> stats = LoadRecords(**input, db.get(), load);
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->records, static_cast<uint64_t>(kRecords));

  std::set<uint64_t> all;
  size_t total = 0;
  for (rocksdb::ColumnFamilyHandle* lane : lanes) {
    std::set<uint64_t> seqs;  // Input order of the lane's records.
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), lane));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      absl::StatusOr<keycodec::CoordinateKey> key =
          keycodec::DecodeCoordinateKey(it->key().ToString());
      ASSERT_TRUE(key.ok()) << key.status();
      seqs.insert(key->seq);
      all.insert(key->seq);
    }
    // Both lanes got several runs' worth (~600 records fill a 64 KiB
    // memtable, ~25 a 2 KiB batch) ...
    EXPECT_GE(seqs.size(), static_cast<size_t>(kRecords / 4));
    // ... in stretches of consecutive input records as long as a memtable
    // holds, not alternating per batch.
    int stretches = 0;
    uint64_t previous = UINT64_MAX - 1;
    for (uint64_t seq : seqs) {
      if (seq != previous + 1) ++stretches;
      previous = seq;
    }
    ASSERT_GT(stretches, 0);
    total += seqs.size();
    EXPECT_GE(seqs.size() / stretches, 200u) << stretches << " stretches";
  }
  // Every record is in exactly one lane.
  EXPECT_EQ(all.size(), static_cast<size_t>(kRecords));
  EXPECT_EQ(total, static_cast<size_t>(kRecords));
  for (rocksdb::ColumnFamilyHandle* lane : lanes) db->DestroyColumnFamilyHandle(lane);
}

}  // namespace
}  // namespace rocksort::loader
