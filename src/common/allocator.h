// File: common/allocator.h
// -----------------------------------------------------------------------------
// How the process asks glibc's malloc for memory, and gives it back.
//
// The sort allocates the same large buffers over and over: every memtable
// fills arena blocks (its whole write_buffer_size), every run written has a
// file buffer, every merge input a readahead buffer. Served by mmap, each
// use maps fresh pages that fault in one 4 KiB page at a time and are
// unmapped on free; on the benchmark VM a fault costs 12-14 us, so a 7 GB
// sort spent ~36 CPU s faulting (2.8 million faults), most of it in the
// loading thread, which is the load phase's critical path. Served from the
// heap, a freed block is reused by the next one of its kind, already mapped.
//
// The price is that a heap keeps what is freed: within a phase the RSS is
// the high-water mark of the phase's live buffers (for memtables, the 3/4 of
// the budget the memory model grants them) rather than their current size.
// Across phases, ReleaseFreedMemory returns what the last phase freed, so a
// phase never pays for the buffers of the one before (the excess measured in
// docs/benchmarks.md, "Memory", when glibc's moving threshold put readahead
// buffers in heaps nothing trimmed).
//
// Both functions do nothing on a C library other than glibc.
#ifndef ROCKSORT_COMMON_ALLOCATOR_H_
#define ROCKSORT_COMMON_ALLOCATOR_H_

#include <cstdint>

namespace rocksort {

// Blocks below this size come from the heap; larger ones are mapped for
// their own lifetime. Above every recurring buffer of a sort at a moderate
// budget (arena blocks are capped at 1 MiB by the store's options plan, file
// buffers are 1 MiB, merge readahead ~1 MiB); one-off buffers such as the
// final merge's readahead (up to 16 MiB) stay mapped, and leave the RSS
// when freed.
inline constexpr uint64_t kHeapBlockLimit = uint64_t{4} << 20;

// Sets malloc's mmap threshold to kHeapBlockLimit (fixed: glibc otherwise
// raises it to the size of any large block freed) and its trim threshold to
// `budget_bytes`, so the top of a heap keeps up to the budget of freed
// memory for reuse instead of returning it after every memtable.
// REQUIRES: called before any other thread starts allocating.
void ConfigureAllocator(uint64_t budget_bytes);

// Returns the free memory of every malloc heap to the system. The pipeline
// calls it at phase boundaries, once a phase's buffers are freed.
void ReleaseFreedMemory();

}  // namespace rocksort

#endif  // ROCKSORT_COMMON_ALLOCATOR_H_
