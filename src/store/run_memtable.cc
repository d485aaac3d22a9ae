#include "store/run_memtable_internal.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/allocator.h"
#include "rocksdb/slice.h"
#include "rocksdb/write_buffer_manager.h"

namespace rocksort::store {
namespace {

using rocksdb::MemTableRep;
using rocksdb::Slice;

uint64_t LoadBigEndian64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return __builtin_bswap64(v);
}

// One memtable entry with the first 16 bytes of its user key, zero-padded,
// as two big-endian integers. For entries a, b: prefix(a) < prefix(b)
// implies user_key(a) < user_key(b) bytewise (a byte that differs inside the
// prefix decides both; a padding zero only lies below a real byte when the
// shorter key is a prefix of the longer). Equal prefixes fall back to the
// full comparator.
struct Item {
  uint64_t hi;
  uint64_t lo;
  const char* entry;
};

// The item arrays of large memtables (2.2 M items, 53 MiB, at -m 768M) on
// transparent huge pages too: the sort and the flush walk them, and
// malloc maps arrays above its mmap threshold afresh for each memtable, in
// base pages faulted in one at a time. Smaller arrays stay on the heap,
// which reuses them from memtable to memtable without a fault.
template <typename T>
struct ItemAllocator {
  using value_type = T;
  ItemAllocator() = default;
  template <typename U>
  explicit ItemAllocator(const ItemAllocator<U>& /*other*/) {}
  static bool OnHeap(size_t n) { return n * sizeof(T) < kHeapBlockLimit; }
  T* allocate(size_t n) {
    if (OnHeap(n)) return std::allocator<T>().allocate(n);
    char* pages = MapHugePages(n * sizeof(T));
    if (pages == nullptr) throw std::bad_alloc();
    return reinterpret_cast<T*>(pages);
  }
  void deallocate(T* p, size_t n) {
    if (OnHeap(n)) {
      std::allocator<T>().deallocate(p, n);
    } else {
      UnmapHugePages(reinterpret_cast<char*>(p), n * sizeof(T));
    }
  }
  bool operator==(const ItemAllocator& /*other*/) const { return true; }
  bool operator!=(const ItemAllocator& /*other*/) const { return false; }
};
using Items = std::vector<Item, ItemAllocator<Item>>;

Item MakeItem(const char* entry) {
  // The entry starts with the varint32 length of the internal key, which is
  // the user key followed by an 8-byte sequence/type trailer.
  const Slice internal_key = rocksdb::GetLengthPrefixedSlice(entry);
  const size_t user_key_size = internal_key.size() >= 8 ? internal_key.size() - 8 : 0;
  char prefix[16] = {};
  std::memcpy(prefix, internal_key.data(), std::min<size_t>(user_key_size, 16));
  return Item{LoadBigEndian64(prefix), LoadBigEndian64(prefix + 8), entry};
}

// The user key of a memtable entry.
Slice UserKey(const char* entry) {
  const Slice internal_key = rocksdb::GetLengthPrefixedSlice(entry);
  return Slice(internal_key.data(), internal_key.size() >= 8 ? internal_key.size() - 8 : 0);
}

// The flush reads the entries in key order, which is all over the memtable:
// each entry is a cache miss on every line of it (~6 of 64 bytes at
// 342-byte records) unless it is fetched ahead. The entry kFarAhead
// positions on has its first line fetched, and the one kNearAhead on, whose
// first line has arrived by then, its lengths read and the rest of it
// (up to kMaxLines lines) fetched.
constexpr size_t kNearAhead = 4;
constexpr size_t kFarAhead = 12;
constexpr size_t kMaxLines = 16;
constexpr size_t kLine = 64;

void PrefetchEntry(const char* entry) {
  const Slice internal_key = rocksdb::GetLengthPrefixedSlice(entry);
  const Slice value = rocksdb::GetLengthPrefixedSlice(internal_key.data() + internal_key.size());
  const char* end = value.data() + value.size();
  const char* line = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(entry) & ~(kLine - 1));
  for (size_t i = 1; i < kMaxLines && line + i * kLine < end; ++i) {
    __builtin_prefetch(line + i * kLine);
  }
}

// When every key starts with the same 16 bytes (read names, or a tag every
// record has the same value of, lead the keys of those orders), the
// prefixes cannot tell any two entries apart and every comparison of the
// sort would go to the full comparator. Then the items get the 16 bytes
// after the prefix all keys share instead: a byte that differs there
// decides the order of both the items and the keys, as the shared part is
// equal. Returns without touching the arena when the prefixes differ.
void SkipCommonPrefix(Items* items) {
  if (items->size() < 2) return;
  const Item& first = items->front();
  for (const Item& item : *items) {
    if (item.hi != first.hi || item.lo != first.lo) return;
  }
  const Slice key0 = UserKey(first.entry);
  size_t common = key0.size();
  for (const Item& item : *items) {
    const Slice key = UserKey(item.entry);
    size_t n = std::min(common, key.size());
    size_t i = 16;  // The first 16 bytes are equal (or padding).
    while (i < n && key.data()[i] == key0.data()[i]) ++i;
    common = std::min(common, i);
    if (common <= 16) return;
  }
  for (Item& item : *items) {
    const Slice key = UserKey(item.entry);
    char prefix[16] = {};
    if (key.size() > common) {
      std::memcpy(prefix, key.data() + common, std::min<size_t>(key.size() - common, 16));
    }
    item.hi = LoadBigEndian64(prefix);
    item.lo = LoadBigEndian64(prefix + 8);
  }
}

void SortItems(const MemTableRep::KeyComparator& compare, Items* items) {
  SkipCommonPrefix(items);
  std::sort(items->begin(), items->end(), [&compare](const Item& a, const Item& b) {
    if (a.hi != b.hi) return a.hi < b.hi;
    if (a.lo != b.lo) return a.lo < b.lo;
    return compare(a.entry, b.entry) < 0;
  });
}

class RunMemTableRep : public MemTableRep {
 public:
  RunMemTableRep(const KeyComparator& compare, rocksdb::Allocator* allocator,
                 std::shared_ptr<HugeChunkPool> chunks,
                 std::shared_ptr<rocksdb::WriteBufferManager> write_buffers,
                 std::shared_ptr<std::atomic<size_t>> entries_hint,
                 std::shared_ptr<const std::atomic<bool>> writes_finished)
      : MemTableRep(allocator),
        compare_(compare),
        chunk_pool_(std::move(chunks)),
        write_buffers_(std::move(write_buffers)),
        entries_hint_(chunk_pool_ != nullptr ? std::move(entries_hint) : nullptr),
        writes_finished_(std::move(writes_finished)) {}

  ~RunMemTableRep() override {
    // As RocksDB's own tracker does for arena blocks when a memtable dies.
    absl::MutexLock lock(&mu_);
    const size_t reserved = ReservedBytes();
    if (write_buffers_ != nullptr && reserved > 0) {
      if (!read_only_) write_buffers_->ScheduleFreeMem(reserved);
      write_buffers_->FreeMem(reserved);
    }
    for (char* chunk : chunks_) chunk_pool_->Give(chunk);
  }

  // Entries go to huge-page chunks when the rep has a pool: the flush reads
  // them in key order, all over the memtable (huge_chunks_internal.h).
  // Each chunk counts in ApproximateMemoryUsage and, like an arena block,
  // with the write buffer manager. An entry larger than a quarter of a chunk
  // (a long read) goes to RocksDB's arena, as every entry does without a
  // pool, and so does everything if the system refuses a mapping.
  // Only the writing thread calls it (no concurrent inserts).
  rocksdb::KeyHandle Allocate(const size_t len, char** buf) override {
    if (chunk_pool_ == nullptr || chunks_refused_ || len > HugeChunkPool::kChunkBytes / 4) {
      return MemTableRep::Allocate(len, buf);
    }
    if (len > chunk_left_) {
      char* chunk = chunk_pool_->Take();
      if (chunk == nullptr) {
        chunks_refused_ = true;
        return MemTableRep::Allocate(len, buf);
      }
      {
        absl::MutexLock lock(&mu_);
        chunks_.push_back(chunk);
      }
      if (write_buffers_ != nullptr) write_buffers_->ReserveMem(HugeChunkPool::kChunkBytes);
      chunk_next_ = chunk;
      chunk_left_ = HugeChunkPool::kChunkBytes;
    }
    *buf = chunk_next_;
    chunk_next_ += len;
    chunk_left_ -= len;
    return *buf;
  }

  // The entry is complete when RocksDB inserts it, so its prefix is read
  // here, while it is still in the cache, and never again: the flush sorts
  // this array in place.
  void Insert(rocksdb::KeyHandle handle) override {
    const Item item = MakeItem(static_cast<const char*>(handle));
    absl::MutexLock lock(&mu_);
    // After FinishWrites an entry would land behind the sorted items.
    assert(sorted_ == nullptr);
    if (entries_.size() == entries_.capacity()) {
      // Grow by half: the capacity counts against write_buffer_size, and
      // with doubling up to half of the array could be unused when the
      // memtable seals (a third at most this way). A chunked memtable
      // starts with as many items as the last one sealed held, so its
      // large array is mapped once instead of grown and copied.
      size_t capacity = std::max<size_t>(1024, entries_.capacity() + entries_.capacity() / 2);
      if (entries_.empty() && entries_hint_ != nullptr) {
        capacity = std::max(capacity, entries_hint_->load(std::memory_order_relaxed));
      }
      const size_t before = ItemBytes();
      entries_.reserve(capacity);
      // The items count with the write buffer manager too, as the chunks
      // do: it caps all memtables together at the budget, and items it
      // does not see (53 MiB per memtable at -m 768M) let it start a
      // third memtable on top of two full ones.
      if (write_buffers_ != nullptr) write_buffers_->ReserveMem(ItemBytes() - before);
    }
    entries_.push_back(item);
  }

  bool Contains(const char* key) const override {
    // Only used by debug checks; a linear scan is fine.
    absl::MutexLock lock(&mu_);
    for (const Item& e : entries_) {
      if (compare_(e.entry, key) == 0) return true;
    }
    return false;
  }

  void MarkReadOnly() override {
    absl::MutexLock lock(&mu_);
    if (!read_only_ && write_buffers_ != nullptr) {
      // No more chunks or items: the write buffer manager stops counting
      // them as memory being filled (RocksDB's tracker does the same for
      // the arena).
      write_buffers_->ScheduleFreeMem(ReservedBytes());
    }
    if (!read_only_ && entries_hint_ != nullptr) {
      entries_hint_->store(entries_.size(), std::memory_order_relaxed);
    }
    read_only_ = true;
  }

  // All the memory of this rep beyond the arena, the sort items and the
  // chunks: RocksDB adds it to the arena's to decide when the memtable is
  // full, so memtables stay within write_buffer_size, flush included (the
  // sort needs no other array).
  size_t ApproximateMemoryUsage() override {
    absl::MutexLock lock(&mu_);
    return ReservedBytes();
  }

  Iterator* GetIterator(rocksdb::Arena* arena) override {
    std::shared_ptr<const Items> sorted;
    {
      absl::MutexLock lock(&mu_);
      if (read_only_ || writes_finished_->load(std::memory_order_acquire)) {
        if (sorted_ == nullptr) {
          // Sort once, in place; later iterators share the result.
          SortItems(compare_, &entries_);
          sorted_ = std::shared_ptr<const Items>(std::shared_ptr<void>(), &entries_);
        }
        sorted = sorted_;
      } else {
        // Only tests iterate a memtable still being filled.
        auto copy = std::make_shared<Items>(entries_);
        SortItems(compare_, copy.get());
        sorted = std::move(copy);
      }
    }
    if (arena == nullptr) return new SortedIterator(compare_, std::move(sorted));
    // In arena mode RocksDB only runs the destructor and never frees the
    // memory, and the Arena API is not public: place the iterator in memory
    // this rep owns, released with the memtable (iterators never outlive it).
    absl::MutexLock lock(&mu_);
    iterator_memory_.emplace_back(new char[sizeof(SortedIterator)]);
    return new (iterator_memory_.back().get()) SortedIterator(compare_, std::move(sorted));
  }

  // RocksDB's default MemTableRep::Get (point lookups; rocksort never does
  // them) takes this iterator and never destroys it. So it owns nothing: it
  // lives in this rep's memory and scans the unsorted entries under the lock
  // (O(n) per step, fine for the odd lookup).
  Iterator* GetDynamicPrefixIterator(rocksdb::Arena* /*arena*/) override {
    absl::MutexLock lock(&mu_);
    iterator_memory_.emplace_back(new char[sizeof(ScanIterator)]);
    return new (iterator_memory_.back().get()) ScanIterator(this);
  }

 private:
  class SortedIterator : public Iterator {
   public:
    SortedIterator(const KeyComparator& compare, std::shared_ptr<const Items> entries)
        : compare_(compare), entries_(std::move(entries)), pos_(entries_->size()) {}

    bool Valid() const override { return pos_ < entries_->size(); }
    const char* key() const override { return (*entries_)[pos_].entry; }
    void Next() override {
      ++pos_;
      FetchAhead();
    }
    void Prev() override { pos_ = pos_ == 0 ? entries_->size() : pos_ - 1; }
    void Seek(const Slice& internal_key, const char* memtable_key) override {
      pos_ = LowerBound(internal_key, memtable_key);
    }
    void SeekForPrev(const Slice& internal_key, const char* memtable_key) override {
      // Last entry <= key.
      size_t upper = LowerBound(internal_key, memtable_key);
      if (upper < entries_->size() &&
          Compare((*entries_)[upper].entry, internal_key, memtable_key) == 0) {
        pos_ = upper;
      } else {
        pos_ = upper == 0 ? entries_->size() : upper - 1;
      }
    }
    void SeekToFirst() override {
      pos_ = 0;
      const size_t n = std::min(entries_->size(), kFarAhead);
      for (size_t i = 0; i < n; ++i) __builtin_prefetch((*entries_)[i].entry);
      for (size_t i = 0; i < std::min(n, kNearAhead); ++i) PrefetchEntry((*entries_)[i].entry);
    }
    void SeekToLast() override { pos_ = entries_->empty() ? 0 : entries_->size() - 1; }

   private:
    // See kNearAhead: a flush steps through every entry with Next().
    void FetchAhead() const {
      const Items& items = *entries_;
      if (pos_ + kFarAhead < items.size()) __builtin_prefetch(items[pos_ + kFarAhead].entry);
      if (pos_ + kNearAhead < items.size()) PrefetchEntry(items[pos_ + kNearAhead].entry);
    }
    int Compare(const char* entry, const Slice& internal_key, const char* memtable_key) const {
      return memtable_key != nullptr ? compare_(entry, memtable_key)
                                     : compare_(entry, internal_key);
    }
    size_t LowerBound(const Slice& internal_key, const char* memtable_key) const {
      auto it = std::lower_bound(entries_->begin(), entries_->end(), 0, [&](const Item& item, int) {
        return Compare(item.entry, internal_key, memtable_key) < 0;
      });
      return static_cast<size_t>(it - entries_->begin());
    }

    const KeyComparator& compare_;
    const std::shared_ptr<const Items> entries_;
    size_t pos_;
  };

  // Iterates in key order without owning memory, by scanning for the
  // smallest entry above the current one.
  class ScanIterator : public Iterator {
   public:
    explicit ScanIterator(const RunMemTableRep* rep) : rep_(rep) {}
    bool Valid() const override { return current_ != nullptr; }
    const char* key() const override { return current_; }
    void Next() override {
      current_ = Smallest([&](const char* e) { return Less(current_, e); });
    }
    void Prev() override { current_ = nullptr; }  // Unused by Get.
    void Seek(const Slice& internal_key, const char* memtable_key) override {
      current_ = Smallest([&](const char* e) {
        return (memtable_key != nullptr ? rep_->compare_(e, memtable_key)
                                        : rep_->compare_(e, internal_key)) >= 0;
      });
    }
    void SeekForPrev(const Slice&, const char*) override { current_ = nullptr; }
    void SeekToFirst() override {
      current_ = Smallest([](const char*) { return true; });
    }
    void SeekToLast() override { current_ = nullptr; }

   private:
    bool Less(const char* a, const char* b) const { return rep_->compare_(a, b) < 0; }
    template <typename Pred>
    const char* Smallest(Pred eligible) const {
      absl::MutexLock lock(&rep_->mu_);
      const char* best = nullptr;
      for (const Item& item : rep_->entries_) {
        const char* e = item.entry;
        if (eligible(e) && (best == nullptr || Less(e, best))) best = e;
      }
      return best;
    }
    const RunMemTableRep* rep_;
    const char* current_ = nullptr;
  };

  const KeyComparator& compare_;
  // Constant after construction; either may be null.
  const std::shared_ptr<HugeChunkPool> chunk_pool_;
  const std::shared_ptr<rocksdb::WriteBufferManager> write_buffers_;
  // Entries of the last memtable sealed (chunked memtables only).
  const std::shared_ptr<std::atomic<size_t>> entries_hint_;
  // Set by the factory's FinishWrites.
  const std::shared_ptr<const std::atomic<bool>> writes_finished_;
  // The writing thread's: where the next entry goes in the newest chunk.
  char* chunk_next_ = nullptr;
  size_t chunk_left_ = 0;
  bool chunks_refused_ = false;
  // Bytes of the chunks taken.
  size_t ChunkBytes() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return chunks_.size() * HugeChunkPool::kChunkBytes;
  }
  // Bytes of the sort items' array.
  size_t ItemBytes() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return entries_.capacity() * sizeof(Item);
  }
  // What the rep has reserved with the write buffer manager.
  size_t ReservedBytes() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ChunkBytes() + ItemBytes();
  }

  mutable absl::Mutex mu_;
  std::vector<char*> chunks_ ABSL_GUARDED_BY(mu_);
  Items entries_ ABSL_GUARDED_BY(mu_);
  bool read_only_ ABSL_GUARDED_BY(mu_) = false;
  // Non-owning alias of entries_ once sorted (entries_ no longer changes).
  std::shared_ptr<const Items> sorted_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<char[]>> iterator_memory_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

rocksdb::MemTableRep* RunMemTableFactory::CreateMemTableRep(
    const rocksdb::MemTableRep::KeyComparator& compare, rocksdb::Allocator* allocator,
    const rocksdb::SliceTransform* /*prefix_extractor*/, rocksdb::Logger* /*logger*/) {
  return new RunMemTableRep(compare, allocator, chunks_, write_buffers_, entries_hint_,
                            writes_finished_);
}

}  // namespace rocksort::store
