#include "store/huge_chunks_internal.h"

#include <sys/mman.h>

#include <cstdint>

namespace rocksort::store {

HugeChunkPool::~HugeChunkPool() { Trim(); }

char* HugeChunkPool::Take() {
  {
    absl::MutexLock lock(&mu_);
    if (!free_.empty()) {
      char* chunk = free_.back();
      free_.pop_back();
      return chunk;
    }
  }
  // Map twice the size and cut it down to the aligned chunk inside: mmap
  // only promises page alignment, and a huge page needs its own.
  const size_t span = 2 * kChunkBytes;
  void* mapped = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<uintptr_t>(mapped);
  const uintptr_t aligned = (base + kChunkBytes - 1) & ~(uintptr_t{kChunkBytes} - 1);
  if (aligned > base) munmap(mapped, aligned - base);
  const uintptr_t end = base + span;
  if (end > aligned + kChunkBytes) {
    munmap(reinterpret_cast<void*>(aligned + kChunkBytes), end - (aligned + kChunkBytes));
  }
  char* chunk = reinterpret_cast<char*>(aligned);
  // Advice only: without transparent huge pages the chunk is ordinary memory.
  (void)madvise(chunk, kChunkBytes, MADV_HUGEPAGE);
  absl::MutexLock lock(&mu_);
  ++mapped_;
  return chunk;
}

void HugeChunkPool::Give(char* chunk) {
  absl::MutexLock lock(&mu_);
  free_.push_back(chunk);
}

uint64_t HugeChunkPool::Trim() {
  std::vector<char*> unmap;
  {
    absl::MutexLock lock(&mu_);
    unmap.swap(free_);
    mapped_ -= unmap.size();
  }
  for (char* chunk : unmap) munmap(chunk, kChunkBytes);
  return static_cast<uint64_t>(unmap.size()) * kChunkBytes;
}

size_t HugeChunkPool::mapped_chunks() const {
  absl::MutexLock lock(&mu_);
  return mapped_;
}

}  // namespace rocksort::store
