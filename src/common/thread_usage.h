// File: common/thread_usage.h
// -----------------------------------------------------------------------------
// CPU time per thread of this process, grouped by thread name, from
// /proc/self/task/*/stat: how busy each kind of thread was in a phase of a
// sort (the main thread, htslib's decoders, the BGZF compressors, RocksDB's
// pools). A thread that exits between two snapshots is missing from the
// later one; what such threads used is the process's CPU time
// (ProcessCpuSeconds) beyond the live threads' (EndedThreadsCpuSeconds).
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

// User + system CPU time of the whole process so far, threads that ended
// included (getrusage).
double ProcessCpuSeconds();

// The CPU time that threads which ended between two snapshots used in
// between: `process_seconds`, the process's CPU time over the same interval,
// minus what UsageBetween found in the live threads. Thread times come in
// clock ticks, so a tick per live thread is rounding: below that, 0.
double EndedThreadsCpuSeconds(double process_seconds,
                              const std::map<std::string, ThreadGroupUsage>& live);

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
