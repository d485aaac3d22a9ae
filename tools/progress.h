// File: tools/progress.h
// -----------------------------------------------------------------------------
// The status line rocksort shows on stderr while it sorts, e.g.
//
//   rocksort: reading 45.2%  12.3M records  1.50 of 3.32 GiB  310k rec/s  ETA 1:23
//   rocksort: merging  27.1M records  0:12
//   rocksort: writing 41.5%  11.2M of 27.1M records  4.10 GiB  1.21M rec/s  ETA 0:18
//
// The pipeline only keeps counters (pipeline::SortProgress, relaxed atomics
// updated per batch); a ticker thread here reads them a few times a second
// and redraws one line in place ("\r", the line, erase to its end). Every
// other message of the run goes through Print, which erases the line first,
// so that a warning is never written into it. Output that bypasses Print
// (htslib's own log lines, shown with -v or --verbosity) can still land
// after the line.
//
// Thread-safety: ProgressDisplay is thread-safe; FormatStatusLine and the
// Format* helpers are pure functions.
#ifndef ROCKSORT_TOOLS_PROGRESS_H_
#define ROCKSORT_TOOLS_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "pipeline/pipeline.h"

namespace rocksort::tools {

// What one status line shows.
struct ProgressSample {
  pipeline::Phase phase = pipeline::Phase::kLoad;
  double seconds = 0;          // Since the phase started.
  uint64_t records = 0;        // Loaded (reading, merging) or written (writing).
  uint64_t records_total = 0;  // Writing: the records loaded. Otherwise unused.
  // Reading: input bytes consumed of `bytes_total` (0 = unknown: a pipe).
  // Writing: uncompressed record bytes written (`bytes_total` unused).
  uint64_t bytes = 0;
  uint64_t bytes_total = 0;
};

// The status line for `sample`, without "\r" or a newline. Reading shows
// the percentage of the input and an ETA only when the input's size is
// known; writing shows them against the records loaded; merging shows the
// time it has taken so far. Rates and ETAs are averages since the phase
// began, and absent in its first second.
std::string FormatStatusLine(const ProgressSample& sample);

// 999, 1.00k, 12.3k, 123k, 1.23M, ... (powers of 1000).
std::string FormatCount(uint64_t n);
// 512 B, 1.00 KiB, 12.3 MiB, 123 GiB, ... (powers of 1024).
std::string FormatBytes(uint64_t n);
// M:SS under an hour, else H:MM:SS (whole seconds, rounded).
std::string FormatDuration(double seconds);

// Draws the status line on `fd` until Stop(). Not copyable.
class ProgressDisplay {
 public:
  // Starts the ticker thread, which redraws every `interval` once a phase
  // has begun. `progress` must outlive this object.
  explicit ProgressDisplay(const pipeline::SortProgress& progress, int fd,
                           std::chrono::milliseconds interval = std::chrono::milliseconds(250));
  ProgressDisplay(const ProgressDisplay&) = delete;
  ProgressDisplay& operator=(const ProgressDisplay&) = delete;
  ~ProgressDisplay() { Stop(); }

  // A phase begins (pipeline::SortObserver::on_phase).
  void OnPhase(pipeline::Phase phase);
  // Writes `line` and a newline, erasing the status line first; the next
  // tick draws it again below. Any thread.
  void Print(const std::string& line);
  // Joins the ticker and erases the line. Idempotent; Print still works
  // afterwards (without a line to erase).
  void Stop();

 private:
  using Clock = std::chrono::steady_clock;

  void Run();
  void DrawLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteLocked(const std::string& text) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const pipeline::SortProgress& progress_;
  const int fd_;
  const std::chrono::milliseconds interval_;

  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;  // A phase has begun.
  pipeline::Phase phase_ ABSL_GUARDED_BY(mu_) = pipeline::Phase::kLoad;
  Clock::time_point phase_start_ ABSL_GUARDED_BY(mu_);
  bool drawn_ ABSL_GUARDED_BY(mu_) = false;  // The line is on the screen.
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Started in the constructor, joined by Stop().
};

}  // namespace rocksort::tools

#endif  // ROCKSORT_TOOLS_PROGRESS_H_
