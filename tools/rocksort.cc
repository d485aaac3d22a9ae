// rocksort: coordinate-sort SAM/BAM through a temporary RocksDB.
#include "absl/synchronization/mutex.h"
#include "cli.h"

int main(int argc, char** argv) {
  // Debian's abseil is built without NDEBUG, so every absl::Mutex lock also
  // feeds its deadlock detector (GraphCycles): 0.7% of the CPU of a sort in a
  // profile. The tests keep it on; the shipped binary does not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return rocksort::tools::RocksortMain(argc, argv);
}
