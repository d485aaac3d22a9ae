#include "common/thread_usage.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace rocksort {
namespace {

// Reads name and utime + stime of /proc/self/task/<tid>/stat. The name is
// in parentheses and may hold spaces or parentheses itself: the fields
// resume after the last ')'.
bool ReadThread(int tid, ThreadCpu* out) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return false;
  const size_t open = line.find('(');
  const size_t close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  out->name = line.substr(open + 1, close - open - 1);
  std::istringstream fields(line.substr(close + 2));
  // Fields 3.. (state, ppid, ...): utime and stime are fields 14 and 15.
  std::string skip;
  for (int i = 3; i < 14; ++i) fields >> skip;
  unsigned long long utime = 0, stime = 0;
  if (!(fields >> utime >> stime)) return false;
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  out->cpu_seconds = static_cast<double>(utime + stime) / ticks;
  return true;
}

}  // namespace

ThreadSnapshot SnapshotThreads() {
  ThreadSnapshot snapshot;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return snapshot;
  while (const dirent* entry = ::readdir(dir)) {
    const int tid = std::atoi(entry->d_name);
    ThreadCpu cpu;
    if (tid > 0 && ReadThread(tid, &cpu)) snapshot[tid] = cpu;
  }
  ::closedir(dir);
  return snapshot;
}

std::map<std::string, ThreadGroupUsage> UsageBetween(const ThreadSnapshot& before,
                                                     const ThreadSnapshot& after) {
  std::map<std::string, ThreadGroupUsage> groups;
  for (const auto& [tid, now] : after) {
    const auto then = before.find(tid);
    const double start = then == before.end() ? 0 : then->second.cpu_seconds;
    ThreadGroupUsage& group = groups[now.name];
    ++group.threads;
    group.cpu_seconds += now.cpu_seconds - start;
  }
  return groups;
}

double ProcessCpuSeconds() {
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

double EndedThreadsCpuSeconds(double process_seconds,
                              const std::map<std::string, ThreadGroupUsage>& live) {
  double live_seconds = 0;
  int live_threads = 0;
  for (const auto& [name, usage] : live) {
    live_seconds += usage.cpu_seconds;
    live_threads += usage.threads;
  }
  static const double tick = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  const double ended = process_seconds - live_seconds;
  return ended > tick * (live_threads + 1) ? ended : 0;
}

uint64_t PeakRssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  }
  return 0;
}

void SetThreadName(const char* name) {
  char truncated[16];
  std::snprintf(truncated, sizeof(truncated), "%s", name);
  pthread_setname_np(pthread_self(), truncated);
}

std::string ThreadName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

}  // namespace rocksort
