#include "compaction_policy/run_memtable.h"

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "test_util.h"

namespace rocksort::compaction_policy {
namespace {

class RunMemTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rocksdb::Options options;
    options.create_if_missing = true;
    options.memtable_factory = std::make_shared<RunMemTableFactory>();
    options.allow_concurrent_memtable_write = false;
    options.disable_auto_compactions = true;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir_.File("db"), &db).ok());
    db_.reset(db);
  }

  // Keys that stress the prefix sort: short keys, keys that are prefixes of
  // others, zero bytes, and long keys equal in their first 16 bytes.
  std::vector<std::string> Keys() {
    std::mt19937_64 rng(7);
    std::vector<std::string> keys = {"", "a", std::string("a\0", 2), std::string("a\0\0", 3),
                                     "ab", std::string(16, 'x'), std::string(16, 'x') + "a",
                                     std::string(16, 'x') + std::string(1, '\0')};
    for (int i = 0; i < 3000; ++i) {
      std::string k(rng() % 24, '\0');
      for (char& c : k) c = static_cast<char>(rng() % 3);  // Many collisions.
      if (i % 3 == 0) k = std::string(16, '\1') + k;       // Shared prefix.
      keys.push_back(k);
    }
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    return keys;
  }

  std::vector<std::string> ScanAll() {
    std::vector<std::string> out;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) out.push_back(it->key().ToString());
    EXPECT_TRUE(it->status().ok());
    return out;
  }

  testing::ScratchDir dir_;
  std::unique_ptr<rocksdb::DB> db_;
};

TEST_F(RunMemTableTest, IterationOrderIsBytewiseBeforeAndAfterFlush) {
  std::vector<std::string> keys = Keys();
  std::vector<std::string> shuffled = keys;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(3));
  for (const std::string& k : shuffled) ASSERT_TRUE(db_->Put({}, k, "v").ok());
  EXPECT_EQ(ScanAll(), keys);  // Mutable memtable: sorted snapshot.
  ASSERT_TRUE(db_->Flush(rocksdb::FlushOptions()).ok());
  EXPECT_EQ(ScanAll(), keys);  // Through the sorted flush output.
}

TEST_F(RunMemTableTest, SeekAndSeekForPrevFindNeighbours) {
  for (const char* k : {"b", "d", "f"}) ASSERT_TRUE(db_->Put({}, k, "v").ok());
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  it->Seek("c");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key().ToString(), "d");
  it->SeekForPrev("c");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key().ToString(), "b");
  it->SeekForPrev("d");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key().ToString(), "d");
  it->Seek("g");
  EXPECT_FALSE(it->Valid());
  it->SeekToLast();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key().ToString(), "f");
  it->Prev();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key().ToString(), "d");
}

TEST_F(RunMemTableTest, OverwrittenKeyReturnsNewestValue) {
  ASSERT_TRUE(db_->Put({}, "k", "old").ok());
  ASSERT_TRUE(db_->Put({}, "k", "new").ok());
  std::string value;
  ASSERT_TRUE(db_->Get({}, "k", &value).ok());
  EXPECT_EQ(value, "new");
  ASSERT_TRUE(db_->Flush(rocksdb::FlushOptions()).ok());
  ASSERT_TRUE(db_->Get({}, "k", &value).ok());
  EXPECT_EQ(value, "new");
}

}  // namespace
}  // namespace rocksort::compaction_policy
