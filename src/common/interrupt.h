// File: common/interrupt.h
// -----------------------------------------------------------------------------
// Handling of terminating signals (SIGINT, SIGTERM, SIGHUP, SIGUSR1,
// SIGUSR2, SIGXCPU, SIGALRM) that never leaves temp data behind.
//
// InterruptGuard blocks those signals in the calling thread (construct it in
// main() before any other thread starts, so every thread inherits the mask)
// and receives them on a thread of its own:
//   1st signal: sets cancelled(); the pipeline notices between batches,
//               unwinds, and its destructors remove the temp DB and the
//               partial output. main() then exits 128 + signal.
//   after a grace period, or on a 2nd signal: the guard itself removes every
//               registered path and calls _exit(128 + signal). This covers a
//               pipeline blocked in a read from a silent pipe.
// Removal of a path twice is harmless, so the two can overlap safely.
//
// Paths are registered by their owners (TempDb, OutputFile) and
// unregistered once they are gone or committed.
//
// Thread-safe.
#ifndef ROCKSORT_COMMON_INTERRUPT_H_
#define ROCKSORT_COMMON_INTERRUPT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rocksort {

class CleanupRegistry {
 public:
  virtual ~CleanupRegistry() = default;
  // Remove `path` (file or directory tree) if the process is interrupted.
  virtual void Register(const std::string& path) = 0;
  virtual void Unregister(const std::string& path) = 0;
  // The commit point of a run: calls `publish` (which makes the output
  // registered as `path` visible, e.g. by renaming it) unless the process
  // was interrupted, and after it succeeds unregisters `path`. Cancelled,
  // without calling `publish`, when a signal came first.
  virtual absl::Status Publish(const std::string& path, absl::FunctionRef<absl::Status()> publish) {
    absl::Status status = publish();
    if (status.ok()) Unregister(path);
    return status;
  }
};

class InterruptGuard : public CleanupRegistry {
 public:
  explicit InterruptGuard(absl::Duration grace = absl::Seconds(3));
  ~InterruptGuard() override;  // Stops the signal thread; restores the mask.

  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  const std::atomic<bool>& cancelled() const;
  // The signal received, or 0.
  int signal_number() const;

  void Register(const std::string& path) override;
  void Unregister(const std::string& path) override;
  // Atomic with the forced cleanup: either a signal came first (Cancelled,
  // nothing published) or `publish` runs and the guard disarms, so a run
  // whose output became visible never exits with a signal's status.
  absl::Status Publish(const std::string& path, absl::FunctionRef<absl::Status()> publish) override;

  // Tells the guard the pipeline has finished its own cleanup: no forced
  // cleanup will run after this.
  void Disarm();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Calls `on_cancel` once, on a thread of its own, within `poll` of
// `*cancelled` becoming true, and never after the destructor returns. The
// pipeline uses it to stop a running merge, which its own checks (between
// batches, between merges) cannot reach. With `cancelled` null it does
// nothing.
class CancelWatch {
 public:
  CancelWatch(const std::atomic<bool>* cancelled, std::function<void()> on_cancel,
              absl::Duration poll = absl::Milliseconds(50));
  ~CancelWatch();

  CancelWatch(const CancelWatch&) = delete;
  CancelWatch& operator=(const CancelWatch&) = delete;

 private:
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Removes a file or a directory tree, ignoring errors. Async-unsafe; used
// from normal threads only.
void RemovePathQuietly(const std::string& path);

}  // namespace rocksort

#endif  // ROCKSORT_COMMON_INTERRUPT_H_
