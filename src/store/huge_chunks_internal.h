// File: store/huge_chunks_internal.h  (internal to store/ and its tests)
// -----------------------------------------------------------------------------
// Memory for memtable entries in chunks of one transparent huge page (2 MiB,
// aligned, advised MADV_HUGEPAGE), reused from memtable to memtable.
//
// Why: the flush of a memtable reads its entries in key order, which is a
// random order over the whole memtable. With 4 KiB pages every entry costs a
// TLB miss, and on a virtual machine each miss walks two page tables
// (measured on the realistic input at -@ 2 -m 768M: flushes of 28.8-29.6 CPU
// s on huge pages against 31.8-33.0; docs/benchmarks.md). Filling the memory
// costs one fault per 2 MiB instead of one per 4 KiB.
//
// The pool keeps every chunk returned to it, already faulted in, for the next
// memtable, as the heap kept RocksDB's arena blocks; Trim() unmaps them once
// no memtable will need them again (after loading). Where the kernel has no
// transparent huge pages (or refuses the advice) the chunks are ordinary
// pages and everything else works the same.
//
// The first memtables' memory is new, and faulting it in (the kernel zeroes
// every page) cost the writing thread ~30% of its time in the first seconds
// of a load at -m 768M on the benchmark VM, while the other core idled.
// StartPrefault() has a thread of its own map and fault in a few chunks
// ahead of Take() instead, until the chunks reach what the memtables can use.
//
// Thread-safety: thread-safe; memtables are created by the writing thread
// and freed by flush threads.
#ifndef ROCKSORT_STORE_HUGE_CHUNKS_INTERNAL_H_
#define ROCKSORT_STORE_HUGE_CHUNKS_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace rocksort::store {

// `bytes` rounded up to whole huge pages, mapped, aligned to one, and
// advised MADV_HUGEPAGE; nullptr when the system refuses the mapping.
// Unmap with UnmapHugePages and the same `bytes`.
char* MapHugePages(size_t bytes);
void UnmapHugePages(char* pages, size_t bytes);

class HugeChunkPool {
 public:
  // One transparent huge page on x86-64 and arm64 with 4 KiB base pages.
  static constexpr size_t kChunkBytes = size_t{2} << 20;

  HugeChunkPool() = default;
  HugeChunkPool(const HugeChunkPool&) = delete;
  HugeChunkPool& operator=(const HugeChunkPool&) = delete;
  // Stops prefaulting and unmaps every chunk. REQUIRES: every chunk taken
  // was given back.
  ~HugeChunkPool();

  // Starts the thread (rs-prefault) that keeps up to `ahead` chunks faulted
  // in and free while fewer than `limit` chunks are mapped. Once only.
  void StartPrefault(size_t ahead, size_t limit);

  // A chunk of kChunkBytes, aligned to kChunkBytes: a returned one if any,
  // else newly mapped. nullptr when the system refuses the mapping.
  char* Take();
  // Returns `chunk` (from Take) for reuse.
  void Give(char* chunk);
  // Stops prefaulting and unmaps the chunks given back (and prefaulted);
  // returns how many bytes were unmapped.
  uint64_t Trim();

  // Chunks mapped now, in use or free.
  size_t mapped_chunks() const;

 private:
  void Prefault();
  void StopPrefault();

  mutable absl::Mutex mu_;
  std::vector<char*> free_ ABSL_GUARDED_BY(mu_);
  size_t mapped_ ABSL_GUARDED_BY(mu_) = 0;
  size_t prefault_ahead_ ABSL_GUARDED_BY(mu_) = 0;
  size_t prefault_limit_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_prefault_ ABSL_GUARDED_BY(mu_) = false;
  std::thread prefault_thread_;  // Started and joined by the owner's calls.
};

}  // namespace rocksort::store

#endif  // ROCKSORT_STORE_HUGE_CHUNKS_INTERNAL_H_
