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
// Given a HugeChunkPool, the rep also stores the entries themselves, in
// huge-page chunks instead of RocksDB's arena (huge_chunks_internal.h), and
// reports the chunks to the write buffer manager as RocksDB reports arena
// blocks, so the manager's cap on all memtables counts them. Its item
// array then starts as large as the last sealed memtable's. Item arrays
// too large for the heap (common/allocator.h) are on huge pages as well.
//
// Thread-safety: one writer (allow_concurrent_memtable_write must be false,
// as the factory reports), any number of concurrent iterators; FinishWrites
// from any thread once the writer is done.
#ifndef ROCKSORT_STORE_RUN_MEMTABLE_INTERNAL_H_
#define ROCKSORT_STORE_RUN_MEMTABLE_INTERNAL_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <utility>

#include "rocksdb/memtablerep.h"
#include "rocksdb/write_buffer_manager.h"
#include "store/huge_chunks_internal.h"

namespace rocksort::store {

class RunMemTableFactory : public rocksdb::MemTableRepFactory {
 public:
  // Entries in RocksDB's arena.
  RunMemTableFactory() = default;
  // Entries in `chunks`' chunks (if not null); the chunks and the sort
  // items count with `write_buffers` (if not null: the DB's write buffer
  // manager), as RocksDB counts its arena there.
  RunMemTableFactory(std::shared_ptr<HugeChunkPool> chunks,
                     std::shared_ptr<rocksdb::WriteBufferManager> write_buffers)
      : chunks_(std::move(chunks)), write_buffers_(std::move(write_buffers)) {}

  static const char* kClassName() { return "RocksortRunMemTableFactory"; }
  const char* Name() const override { return kClassName(); }

  using rocksdb::MemTableRepFactory::CreateMemTableRep;
  rocksdb::MemTableRep* CreateMemTableRep(const rocksdb::MemTableRep::KeyComparator& compare,
                                          rocksdb::Allocator* allocator,
                                          const rocksdb::SliceTransform* prefix_extractor,
                                          rocksdb::Logger* logger) override;
  bool IsInsertConcurrentlySupported() const override { return false; }

  // No entry is inserted from now on: an iterator over a memtable still
  // open then sorts its items in place, as over a sealed one, instead of
  // sorting a copy (the final merge reads the last memtables from memory).
  void FinishWrites() { writes_finished_->store(true, std::memory_order_release); }

 private:
  const std::shared_ptr<HugeChunkPool> chunks_;
  const std::shared_ptr<rocksdb::WriteBufferManager> write_buffers_;
  // How many entries the last memtable sealed held: a chunked memtable's
  // item array starts that large.
  const std::shared_ptr<std::atomic<size_t>> entries_hint_ =
      std::make_shared<std::atomic<size_t>>(0);
  const std::shared_ptr<std::atomic<bool>> writes_finished_ =
      std::make_shared<std::atomic<bool>>(false);
};

}  // namespace rocksort::store

#endif  // ROCKSORT_STORE_RUN_MEMTABLE_INTERNAL_H_
