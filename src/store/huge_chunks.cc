#include "store/huge_chunks_internal.h"

#include <sys/mman.h>

#include <cstdint>

namespace rocksort::store {
namespace {

size_t WholeHugePages(size_t bytes) {
  return (bytes + HugeChunkPool::kChunkBytes - 1) & ~(HugeChunkPool::kChunkBytes - 1);
}

}  // namespace

char* MapHugePages(size_t bytes) {
  const size_t size = WholeHugePages(bytes);
  // Map a huge page more and cut the mapping down to the aligned pages
  // inside: mmap only promises base-page alignment.
  const size_t span = size + HugeChunkPool::kChunkBytes;
  void* mapped = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<uintptr_t>(mapped);
  const uintptr_t aligned =
      (base + HugeChunkPool::kChunkBytes - 1) & ~(uintptr_t{HugeChunkPool::kChunkBytes} - 1);
  if (aligned > base) munmap(mapped, aligned - base);
  const uintptr_t end = base + span;
  if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
  char* pages = reinterpret_cast<char*>(aligned);
  // Advice only: without transparent huge pages this is ordinary memory.
  (void)madvise(pages, size, MADV_HUGEPAGE);
  return pages;
}

void UnmapHugePages(char* pages, size_t bytes) { munmap(pages, WholeHugePages(bytes)); }

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
  char* chunk = MapHugePages(kChunkBytes);
  if (chunk == nullptr) return nullptr;
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
  for (char* chunk : unmap) UnmapHugePages(chunk, kChunkBytes);
  return static_cast<uint64_t>(unmap.size()) * kChunkBytes;
}

size_t HugeChunkPool::mapped_chunks() const {
  absl::MutexLock lock(&mu_);
  return mapped_;
}

}  // namespace rocksort::store
