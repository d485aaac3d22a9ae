// rocksort: coordinate-sort SAM/BAM through a temporary RocksDB.
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "cli.h"

namespace {

// Asks the kernel to read every loaded file segment of the process ahead
// (MADV_WILLNEED), in as few requests as the disk takes. On a cold page
// cache the binary is otherwise paged in one fault at a time, each a small
// read from wherever the fault lands: ~90 reads of the executable alone on
// the emulated rotating disk, most of them for static initializers
// (RocksDB's option tables) that run before main (docs/design.md, Start).
// Runs as the executable's first initializer, before those.
int AdviseSegment(dl_phdr_info* info, size_t /*size*/, void* /*data*/) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_LOAD || segment.p_filesz == 0) continue;
    const uintptr_t start = (info->dlpi_addr + segment.p_vaddr) & ~(page - 1);
    const uintptr_t end = info->dlpi_addr + segment.p_vaddr + segment.p_filesz;
    madvise(reinterpret_cast<void*>(start), end - start, MADV_WILLNEED);  // Advice only.
  }
  return 0;
}

__attribute__((constructor(101))) void ReadSegmentsAhead() {
  dl_iterate_phdr(AdviseSegment, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's abseil is built without NDEBUG, so every absl::Mutex lock also
  // feeds its deadlock detector (GraphCycles): 0.7% of the CPU of a sort in a
  // profile. The tests keep it on; the shipped binary does not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return rocksort::tools::RocksortMain(argc, argv);
}
