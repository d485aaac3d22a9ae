#include "common/allocator.h"

#include <algorithm>
#include <climits>

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace rocksort {

void ConfigureAllocator(uint64_t budget_bytes) {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHeapBlockLimit));
  // mallopt takes an int: a budget of 2 GiB or more keeps everything.
  mallopt(M_TRIM_THRESHOLD,
          static_cast<int>(std::min<uint64_t>(std::max(budget_bytes, kHeapBlockLimit), INT_MAX)));
#else
  (void)budget_bytes;
#endif
}

void ReleaseFreedMemory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

}  // namespace rocksort
