// File: store/run_memtable_internal.h  (internal to store/ and its tests)
// -----------------------------------------------------------------------------
// A RocksDB memtable representation for run formation: inserts append a
// (16-byte key prefix, pointer) item (O(1), like VectorRep's pointer), and
// the first iterator over a read-only memtable sorts the items in place,
// once. Unlike VectorRep, which sorts a pointer array with RocksDB's
// internal-key comparator (a varint decode, a virtual call and a memcmp per
// comparison, each chasing a pointer into the arena), this sort works on the
// contiguous items and calls the full comparator only when two prefixes are
// equal. The items are all the memory the rep uses besides the arena, and
// ApproximateMemoryUsage reports them, so a memtable, sort included, stays
// within write_buffer_size. Keys of a sort
// differ within their first 16 bytes (see keycodec), so that almost never
// happens; for other keys the order is still exactly the comparator's.
//
// Why it matters: in profiles the comparator-driven sort was ~8% of all CPU
// of a sort; see docs/benchmarks.md for the measured difference.
//
// Thread-safety: one writer (allow_concurrent_memtable_write must be false,
// as the factory reports), any number of concurrent iterators.
#ifndef ROCKSORT_STORE_RUN_MEMTABLE_INTERNAL_H_
#define ROCKSORT_STORE_RUN_MEMTABLE_INTERNAL_H_

#include "rocksdb/memtablerep.h"

namespace rocksort::store {

class RunMemTableFactory : public rocksdb::MemTableRepFactory {
 public:
  static const char* kClassName() { return "RocksortRunMemTableFactory"; }
  const char* Name() const override { return kClassName(); }

  using rocksdb::MemTableRepFactory::CreateMemTableRep;
  rocksdb::MemTableRep* CreateMemTableRep(const rocksdb::MemTableRep::KeyComparator& compare,
                                          rocksdb::Allocator* allocator,
                                          const rocksdb::SliceTransform* prefix_extractor,
                                          rocksdb::Logger* logger) override;
  bool IsInsertConcurrentlySupported() const override { return false; }
};

}  // namespace rocksort::store

#endif  // ROCKSORT_STORE_RUN_MEMTABLE_INTERNAL_H_
