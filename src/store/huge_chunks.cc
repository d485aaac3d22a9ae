#include "store/huge_chunks_internal.h"

#include <sys/mman.h>

#include <cstdint>

#include "common/thread_usage.h"

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

void HugeChunkPool::StartPrefault(size_t ahead, size_t limit) {
  {
    absl::MutexLock lock(&mu_);
    if (prefault_thread_.joinable() || stop_prefault_) return;
    prefault_ahead_ = ahead;
    prefault_limit_ = limit;
  }
  prefault_thread_ = std::thread([this] {
    SetThreadName("rs-prefault");
    Prefault();
  });
}

void HugeChunkPool::Prefault() {
  const auto wanted = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_prefault_ || (free_.size() < prefault_ahead_ && mapped_ < prefault_limit_);
  };
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&wanted));
      if (stop_prefault_) return;
    }
    char* chunk = MapHugePages(kChunkBytes);
    if (chunk == nullptr) return;  // Take() will find out for itself.
    // One write per base page: a transparent huge page faults in at the
    // first, base pages each at theirs.
    for (size_t offset = 0; offset < kChunkBytes; offset += 4096) chunk[offset] = 0;
    absl::MutexLock lock(&mu_);
    // A chunk Take() mapped meanwhile may take this one past the limit.
    ++mapped_;
    free_.push_back(chunk);
  }
}

void HugeChunkPool::StopPrefault() {
  {
    absl::MutexLock lock(&mu_);
    stop_prefault_ = true;
  }
  if (prefault_thread_.joinable()) prefault_thread_.join();
}

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
  StopPrefault();
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
