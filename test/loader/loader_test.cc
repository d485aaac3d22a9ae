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
#include "loader/bam_record.h"
#include "rocksdb/db.h"
#include "test_util.h"

namespace rocksort::loader {
namespace {

using ::rocksort::testing::ScratchDir;

struct BamDeleter {
  void operator()(bam1_t* b) const { bam_destroy1(b); }
};
using BamPtr = std::unique_ptr<bam1_t, BamDeleter>;

BamPtr MakeRecord(const std::string& name, uint16_t flag, int32_t tid, int64_t pos,
                  const std::vector<uint32_t>& cigar, const std::string& seq,
                  const std::string& aux = "") {
  BamPtr b(bam_init1());
  std::string qual(seq.size(), 30);
  const int r = bam_set1(b.get(), name.size(), name.c_str(), flag, tid, pos, 60, cigar.size(),
                         cigar.data(), -1, -1, 0, seq.size(), seq.c_str(), qual.c_str(),
                         aux.size());
  EXPECT_GE(r, 0);
  if (!aux.empty()) {
    std::memcpy(b->data + b->l_data, aux.data(), aux.size());
    b->l_data += static_cast<int>(aux.size());
  }
  return b;
}

// What htslib's bam_write1 writes for `b`: the reference for our encoder.
std::string HtslibEncoding(const bam1_t& b) {
  ScratchDir dir;
  const std::string path = dir.File("rec.bgzf");
  BGZF* out = bgzf_open(path.c_str(), "wu");
  EXPECT_GE(bam_write1(out, &b), 0);
  EXPECT_EQ(bgzf_close(out), 0);
  BGZF* in = bgzf_open(path.c_str(), "r");
  std::string bytes;
  char buf[1 << 16];
  ssize_t n;
  while ((n = bgzf_read(in, buf, sizeof(buf))) > 0) bytes.append(buf, n);
  bgzf_close(in);
  return bytes;
}

std::string OurEncoding(const bam1_t& b) {
  EncodedRecord encoded;
  absl::Status s = EncodeBamRecord(b, &encoded);
  EXPECT_TRUE(s.ok()) << s;
  std::string out;
  encoded.AppendTo(&out);
  EXPECT_EQ(out.size(), encoded.total_size);
  return out;
}

TEST(BamRecord, EncodingEqualsHtslibForPlainRecord) {
  // A 5-character name makes htslib pad it with extra NULs in memory.
  BamPtr b = MakeRecord("read1", 0x10, 0, 100, {bam_cigar_gen(4, BAM_CMATCH)}, "ACGT",
                        std::string("NMC\x02", 4));
  ASSERT_GT(b->core.l_extranul, 0);
  EXPECT_EQ(OurEncoding(*b), HtslibEncoding(*b));
}

TEST(BamRecord, EncodingEqualsHtslibForUnmappedRecord) {
  BamPtr b = MakeRecord("unmapped/1", 0x4, -1, -1, {}, "NNNNACGT");
  EXPECT_EQ(OurEncoding(*b), HtslibEncoding(*b));
}

TEST(BamRecord, RecordsLargerThan64KiBAreEncodedWhole) {
  const std::string seq(100000, 'A');
  BamPtr b = MakeRecord("big", 0, 2, 5, {bam_cigar_gen(100000, BAM_CMATCH)}, seq,
                        "XZZ" + std::string(70000, 'x') + std::string(1, '\0'));
  const std::string ours = OurEncoding(*b);
  EXPECT_GT(ours.size(), 200000u);
  EXPECT_EQ(ours, HtslibEncoding(*b));
}

TEST(BamRecord, CigarOver65535OpsMovesToCgTag) {
  std::vector<uint32_t> cigar;
  std::string seq;
  for (int i = 0; i < 40000; ++i) {
    cigar.push_back(bam_cigar_gen(1, BAM_CMATCH));
    cigar.push_back(bam_cigar_gen(1, BAM_CINS));
    seq += "AC";
  }
  BamPtr b = MakeRecord("longcigar", 0, 0, 1000, cigar, seq, std::string("NMC\x07", 4));
  ASSERT_EQ(b->core.n_cigar, 80000u);
  const std::string ours = OurEncoding(*b);
  EXPECT_EQ(ours, HtslibEncoding(*b));
  EXPECT_NE(ours.find("CGBI"), std::string::npos);
}

TEST(BamRecord, RejectsReadNameLongerThan254) {
  BamPtr b = MakeRecord("x", 4, -1, -1, {}, "A");
  // bam_set1 refuses long names, so lengthen the stored name directly.
  b->core.l_qname = 300;
  b->core.l_extranul = 0;
  EncodedRecord encoded;
  EXPECT_EQ(EncodeBamRecord(*b, &encoded).code(), absl::StatusCode::kInvalidArgument);
}

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
