#include "store/run_memtable_internal.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "rocksdb/write_buffer_manager.h"
#include "test_util.h"

namespace rocksort::store {
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
    std::vector<std::string> keys = {"",
                                     "a",
                                     std::string("a\0", 2),
                                     std::string("a\0\0", 3),
                                     "ab",
                                     std::string(16, 'x'),
                                     std::string(16, 'x') + "a",
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

  test_util::ScratchDir dir_;
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

// Orders memtable entries (varint32 length, user key, 8-byte trailer) by user
// key, as RocksDB's internal-key comparator does for distinct user keys.
class UserKeyOrder : public rocksdb::MemTableRep::KeyComparator {
 public:
  int operator()(const char* a, const char* b) const override {
    return UserKey(rocksdb::GetLengthPrefixedSlice(a))
        .compare(UserKey(rocksdb::GetLengthPrefixedSlice(b)));
  }
  int operator()(const char* a, const rocksdb::Slice& key) const override {
    return UserKey(rocksdb::GetLengthPrefixedSlice(a)).compare(UserKey(key));
  }

 private:
  static rocksdb::Slice UserKey(const rocksdb::Slice& internal_key) {
    return rocksdb::Slice(internal_key.data(), internal_key.size() - 8);
  }
};

// `n` memtable entries of random 16-byte keys (as keycodec's) with their
// 8-byte trailers, length-prefixed, and no value.
std::vector<std::string> RandomKeyEntries(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> entries(n);
  for (std::string& e : entries) {
    e = std::string(1, static_cast<char>(24));
    for (int i = 0; i < 16; ++i) e.push_back(static_cast<char>(rng()));
    e.append(8, '\0');
  }
  return entries;
}

// The memory contract: RocksDB seals a memtable when its arena plus the rep's
// ApproximateMemoryUsage reach write_buffer_size, so the rep must report
// every byte it will use, including what the flush needs to sort it (one
// 16-byte key prefix and a pointer per entry). Before, the rep reported its
// 8-byte pointers and the flush allocated a 24-byte array per entry on top.
TEST(RunMemTableRepTest, ReportsTheMemoryItsFlushSortUses) {
  RunMemTableFactory factory;
  UserKeyOrder order;
  std::unique_ptr<rocksdb::MemTableRep> rep(
      factory.CreateMemTableRep(order, /*allocator=*/nullptr, nullptr, nullptr));
  constexpr int kEntries = 10000;
  constexpr size_t kSortItemBytes = 16 + sizeof(const char*);
  std::vector<std::string> entries = RandomKeyEntries(kEntries, 11);
  for (std::string& e : entries) rep->Insert(e.data());
  const size_t reported = rep->ApproximateMemoryUsage();
  EXPECT_GE(reported, kEntries * kSortItemBytes);
  EXPECT_LE(reported, kEntries * kSortItemBytes * 2);  // Growth slack, not a copy more.

  rep->MarkReadOnly();
  std::unique_ptr<rocksdb::MemTableRep::Iterator> it(rep->GetIterator(nullptr));
  int count = 0;
  const char* previous = nullptr;
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++count) {
    if (previous != nullptr) {
      EXPECT_LT(order(previous, it->key()), 0);
    }
    previous = it->key();
  }
  EXPECT_EQ(count, kEntries);
  EXPECT_EQ(rep->ApproximateMemoryUsage(), reported);  // Sorted in place.
}

// Read names lead the keys of name orders: every key of a memtable may
// share its first 16 bytes and more. The sort then orders by the bytes
// after what all keys share, and must still give the comparator's order
// (the comparator is called only to break ties; counted here).
class CountingUserKeyOrder : public UserKeyOrder {
 public:
  int operator()(const char* a, const char* b) const override {
    ++calls;
    return UserKeyOrder::operator()(a, b);
  }
  using UserKeyOrder::operator();
  mutable int calls = 0;
};

TEST(RunMemTableRepTest, KeysSharingALongPrefixSortByWhatFollowsIt) {
  RunMemTableFactory factory;
  CountingUserKeyOrder order;
  std::unique_ptr<rocksdb::MemTableRep> rep(
      factory.CreateMemTableRep(order, /*allocator=*/nullptr, nullptr, nullptr));
  constexpr int kEntries = 20000;
  const std::string shared = "A00001:101:H66990DSXY:1:";  // 24 bytes.
  std::mt19937_64 rng(5);
  std::vector<std::string> entries(kEntries);
  for (std::string& e : entries) {
    std::string key = shared + std::to_string(rng() % 100000) + ":" + std::to_string(rng() % 7);
    e = std::string(1, static_cast<char>(key.size() + 8)) + key + std::string(8, '\0');
    rep->Insert(const_cast<char*>(e.data()));
  }
  rep->MarkReadOnly();
  std::unique_ptr<rocksdb::MemTableRep::Iterator> it(rep->GetIterator(nullptr));
  const int sort_calls = order.calls;
  int count = 0;
  const char* previous = nullptr;
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++count) {
    if (previous != nullptr) {
      EXPECT_LE(order(previous, it->key()), 0);
    }
    previous = it->key();
  }
  EXPECT_EQ(count, kEntries);
  // Only ties beyond 16 bytes after the shared prefix (none here) and equal
  // keys reach the comparator: far fewer calls than n log n.
  EXPECT_LT(sort_calls, kEntries * 2);
}

// With a chunk pool the rep stores the entries itself, and must account for
// them as RocksDB's arena does: each chunk and the sort items with the write
// buffer manager while the memtable fills, no longer as mutable memory once
// it is read-only, and not at all once it is gone, when the chunks go back to
// the pool.
TEST(RunMemTableRepTest, ChunksCountWithTheWriteBufferManagerUntilTheMemtableDies) {
  auto pool = std::make_shared<HugeChunkPool>();
  auto write_buffers = std::make_shared<rocksdb::WriteBufferManager>(size_t{1} << 30);
  RunMemTableFactory factory(pool, write_buffers);
  UserKeyOrder order;
  std::unique_ptr<rocksdb::MemTableRep> rep(
      factory.CreateMemTableRep(order, /*allocator=*/nullptr, nullptr, nullptr));
  // 12,000 entries of 300 bytes: 3.6 MB, two chunks.
  constexpr int kEntries = 12000;
  constexpr size_t kEntryBytes = 300;
  std::mt19937_64 rng(13);
  std::vector<std::string> keys;
  for (int i = 0; i < kEntries; ++i) {
    std::string key(16, '\0');
    for (char& c : key) c = static_cast<char>(rng());
    keys.push_back(key);
    char* buf = nullptr;
    rocksdb::KeyHandle handle = rep->Allocate(kEntryBytes, &buf);
    ASSERT_EQ(static_cast<char*>(handle), buf);
    // varint32 24, the key, an 8-byte trailer, then filler as a value.
    buf[0] = 24;
    std::memcpy(buf + 1, key.data(), 16);
    std::memset(buf + 17, 0, 8);
    std::memset(buf + 25, 'v', kEntryBytes - 25);
    rep->Insert(handle);
  }
  constexpr size_t kChunk = HugeChunkPool::kChunkBytes;
  constexpr size_t kItemBytes = kEntries * (16 + sizeof(char*));
  EXPECT_EQ(pool->mapped_chunks(), 2u);
  const size_t used = rep->ApproximateMemoryUsage();
  EXPECT_GE(used, 2 * kChunk + kItemBytes);
  EXPECT_LE(used, 2 * kChunk + 2 * kItemBytes);  // Growth slack.
  EXPECT_EQ(write_buffers->memory_usage(), used);
  EXPECT_EQ(write_buffers->mutable_memtable_memory_usage(), used);

  rep->MarkReadOnly();
  EXPECT_EQ(write_buffers->memory_usage(), used);
  EXPECT_EQ(write_buffers->mutable_memtable_memory_usage(), 0u);
  std::sort(keys.begin(), keys.end());
  std::unique_ptr<rocksdb::MemTableRep::Iterator> it(rep->GetIterator(nullptr));
  size_t i = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++i) {
    ASSERT_LT(i, keys.size());
    EXPECT_EQ(std::string(it->key() + 1, 16), keys[i]);
    EXPECT_EQ(it->key()[kEntryBytes - 1], 'v');
  }
  EXPECT_EQ(i, keys.size());
  it.reset();

  rep.reset();
  EXPECT_EQ(write_buffers->memory_usage(), 0u);
  EXPECT_EQ(pool->mapped_chunks(), 2u);  // Kept for the next memtable.
  EXPECT_EQ(pool->Trim(), 2 * kChunk);
}

// Through a DB: entries in chunks, and values too large for a chunk's
// quarter in RocksDB's arena, all read back before and after the flush.
TEST(RunMemTableRepTest, ChunkedMemtableKeepsEveryEntryIncludingLargeOnes) {
  test_util::ScratchDir dir;
  auto pool = std::make_shared<HugeChunkPool>();
  rocksdb::Options options;
  options.create_if_missing = true;
  options.write_buffer_size = 64 << 20;
  options.write_buffer_manager = std::make_shared<rocksdb::WriteBufferManager>(size_t{256} << 20);
  options.memtable_factory =
      std::make_shared<RunMemTableFactory>(pool, options.write_buffer_manager);
  options.allow_concurrent_memtable_write = false;
  options.disable_auto_compactions = true;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, dir.File("db"), &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  std::map<std::string, std::string> expected;
  std::mt19937_64 rng(17);
  for (int i = 0; i < 20000; ++i) {
    const std::string key = std::to_string(rng());
    const size_t size = i % 5000 == 0 ? (size_t{1} << 20) : 200 + rng() % 400;
    expected[key] = std::string(size, static_cast<char>('a' + i % 26));
    ASSERT_TRUE(db->Put({}, key, expected[key]).ok());
  }
  EXPECT_GT(pool->mapped_chunks(), 0u);
  const auto scan = [&db] {
    std::map<std::string, std::string> got;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      got[it->key().ToString()] = it->value().ToString();
    }
    EXPECT_TRUE(it->status().ok());
    return got;
  };
  EXPECT_TRUE(scan() == expected);
  ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
  EXPECT_TRUE(scan() == expected);
  ASSERT_TRUE(db->Close().ok());
}

// A chunked memtable's item array starts as large as the last sealed
// memtable's, instead of growing to it by halves, copied each time.
TEST(RunMemTableRepTest, ChunkedMemtableStartsWithTheLastOnesItemCount) {
  constexpr size_t kItemBytes = 16 + sizeof(char*);
  constexpr int kEntries = 5000;
  std::vector<std::string> entries = RandomKeyEntries(kEntries, 19);
  UserKeyOrder order;
  for (const bool chunked : {true, false}) {
    SCOPED_TRACE(chunked);
    RunMemTableFactory factory = chunked ? RunMemTableFactory(std::make_shared<HugeChunkPool>(),
                                                              /*write_buffers=*/nullptr)
                                         : RunMemTableFactory();
    std::unique_ptr<rocksdb::MemTableRep> first(
        factory.CreateMemTableRep(order, /*allocator=*/nullptr, nullptr, nullptr));
    for (std::string& e : entries) first->Insert(e.data());
    first->MarkReadOnly();
    std::unique_ptr<rocksdb::MemTableRep> second(
        factory.CreateMemTableRep(order, /*allocator=*/nullptr, nullptr, nullptr));
    second->Insert(entries[0].data());
    if (chunked) {
      EXPECT_EQ(second->ApproximateMemoryUsage(), kEntries * kItemBytes);
    } else {
      EXPECT_EQ(second->ApproximateMemoryUsage(), 1024 * kItemBytes);
    }
  }
}

// Without a chunk pool RocksDB counts the arena with the write buffer
// manager; the rep adds its sort items (24 bytes per entry, 7% of a
// memtable of 342-byte records), else the manager lets a third memtable
// start on top of two full ones and the load exceeds the budget.
TEST(RunMemTableRepTest, SortItemsCountWithTheWriteBufferManager) {
  auto write_buffers = std::make_shared<rocksdb::WriteBufferManager>(size_t{1} << 30);
  RunMemTableFactory factory(/*chunks=*/nullptr, write_buffers);
  UserKeyOrder order;
  std::unique_ptr<rocksdb::MemTableRep> rep(
      factory.CreateMemTableRep(order, /*allocator=*/nullptr, nullptr, nullptr));
  constexpr int kEntries = 10000;
  std::vector<std::string> entries = RandomKeyEntries(kEntries, 23);
  for (std::string& e : entries) rep->Insert(e.data());
  const size_t items = rep->ApproximateMemoryUsage();
  EXPECT_GE(items, kEntries * (16 + sizeof(char*)));
  EXPECT_EQ(write_buffers->memory_usage(), items);
  EXPECT_EQ(write_buffers->mutable_memtable_memory_usage(), items);
  rep->MarkReadOnly();
  EXPECT_EQ(write_buffers->memory_usage(), items);
  EXPECT_EQ(write_buffers->mutable_memtable_memory_usage(), 0u);
  rep.reset();
  EXPECT_EQ(write_buffers->memory_usage(), 0u);
}

}  // namespace
}  // namespace rocksort::store
