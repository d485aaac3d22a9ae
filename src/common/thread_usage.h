// File: common/thread_usage.h
// -----------------------------------------------------------------------------
// CPU time per thread of this process, grouped by thread name, from
// /proc/self/task/*/stat: how busy each kind of thread was in a phase of a
// sort (the main thread, htslib's decoders, the BGZF compressors, RocksDB's
// pools). A thread that exits between two snapshots is missing from the
// later one, so take a phase's last snapshot before its threads are joined.
//
// Linux only; elsewhere the snapshots are empty. Thread-safe.
#ifndef ROCKSORT_COMMON_THREAD_USAGE_H_
#define ROCKSORT_COMMON_THREAD_USAGE_H_

#include <map>
#include <string>

namespace rocksort {

struct ThreadCpu {
  std::string name;
  double cpu_seconds = 0;  // User + system time since the thread started.
};

// Thread id -> name and CPU time, for every thread alive now.
using ThreadSnapshot = std::map<int, ThreadCpu>;
ThreadSnapshot SnapshotThreads();

struct ThreadGroupUsage {
  int threads = 0;
  double cpu_seconds = 0;
};

// CPU time spent between `before` and `after` by the threads alive at
// `after`, grouped by name (threads born in between count from zero).
std::map<std::string, ThreadGroupUsage> UsageBetween(const ThreadSnapshot& before,
                                                     const ThreadSnapshot& after);

// The process's peak resident memory so far (VmHWM), bytes; 0 if unknown.
// (Resetting it, /proc/self/clear_refs, would also lower what getrusage
// and wait4 report as the process's peak.)
uint64_t PeakRssBytes();

// Names the calling thread (at most 15 characters are kept). Threads it
// creates afterwards inherit the name.
void SetThreadName(const char* name);
// The calling thread's name.
std::string ThreadName();

}  // namespace rocksort

#endif  // ROCKSORT_COMMON_THREAD_USAGE_H_
