#include "common/thread_usage.h"

#include <time.h>

#include <map>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace rocksort {
namespace {

// Keeps the calling thread on a CPU until its own CPU clock advanced by
// `seconds` (however busy the machine is).
void BurnCpu(double seconds) {
  auto now = [] {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
  };
  const double start = now();
  volatile unsigned sink = 0;
  while (now() - start < seconds) {
    for (int i = 0; i < 10000; ++i) sink = sink + static_cast<unsigned>(i);
  }
}

// A thread that ended between two snapshots is missing from the live
// groups; its time is what the process used beyond them.
TEST(ThreadUsage, AThreadThatEndedIsCountedAsEndedThreadTime) {
  const ThreadSnapshot before = SnapshotThreads();
  const double process_before = ProcessCpuSeconds();
  std::thread worker([] {
    SetThreadName("rs-test-ended");
    BurnCpu(0.3);
  });
  worker.join();
  const std::map<std::string, ThreadGroupUsage> live = UsageBetween(before, SnapshotThreads());
  const double process = ProcessCpuSeconds() - process_before;
  EXPECT_EQ(live.count("rs-test-ended"), 0u);
  const double ended = EndedThreadsCpuSeconds(process, live);
  EXPECT_GE(ended, 0.25);
  EXPECT_LE(ended, process);
}

// Time of live threads is theirs, not the ended threads': rounding to clock
// ticks leaves nothing over.
TEST(ThreadUsage, LiveThreadsLeaveNoEndedThreadTime) {
  const ThreadSnapshot before = SnapshotThreads();
  const double process_before = ProcessCpuSeconds();
  BurnCpu(0.3);
  const std::map<std::string, ThreadGroupUsage> live = UsageBetween(before, SnapshotThreads());
  const double process = ProcessCpuSeconds() - process_before;
  const std::string me = ThreadName();
  ASSERT_EQ(live.count(me), 1u);
  EXPECT_GE(live.at(me).cpu_seconds, 0.25);
  EXPECT_EQ(EndedThreadsCpuSeconds(process, live), 0);
}

}  // namespace
}  // namespace rocksort
