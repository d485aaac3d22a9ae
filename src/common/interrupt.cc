#include "common/interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/thread_usage.h"

namespace rocksort {

struct InterruptGuard::State {
  std::atomic<bool> cancelled{false};
  std::atomic<int> signal{0};
  absl::Mutex mu;
  std::set<std::string> paths ABSL_GUARDED_BY(mu);
  bool disarmed ABSL_GUARDED_BY(mu) = false;
  bool stop ABSL_GUARDED_BY(mu) = false;
  absl::Duration grace;
  sigset_t mask;
  sigset_t old_mask;
  std::thread thread;

  void ForceCleanupAndExit(int sig) {
    // Holds mu until _exit: main's Disarm() blocks meanwhile, so the process
    // ends with exactly one message and one exit status.
    mu.Lock();
    if (disarmed) {
      mu.Unlock();
      return;
    }
    // Removing paths while RocksDB threads still run is safe: at worst a
    // file they create afterwards makes one removal fail, so retry.
    for (int attempt = 0; attempt < 3; ++attempt) {
      for (const std::string& p : paths) RemovePathQuietly(p);
    }
    char msg[96];
    const int n = std::snprintf(msg, sizeof(msg),
                                "rocksort: terminated by signal %d; temporary data removed\n", sig);
    if (n > 0) (void)!::write(STDERR_FILENO, msg, static_cast<size_t>(n));
    _exit(128 + sig);
  }

  void Loop() {
    absl::Time deadline = absl::InfiniteFuture();
    for (;;) {
      {
        absl::MutexLock lock(&mu);
        if (stop) return;
        if (disarmed) deadline = absl::InfiniteFuture();
      }
      if (absl::Now() >= deadline) ForceCleanupAndExit(signal.load());
      struct timespec timeout = {0, 100 * 1000 * 1000};  // Poll stop/deadline.
      const int sig = sigtimedwait(&mask, nullptr, &timeout);
      if (sig <= 0) continue;
      if (signal.load() != 0) ForceCleanupAndExit(signal.load());  // 2nd signal.
      signal.store(sig);
      cancelled.store(true);
      deadline = absl::Now() + grace;
    }
  }
};

InterruptGuard::InterruptGuard(absl::Duration grace) : state_(std::make_shared<State>()) {
  state_->grace = grace;
  sigemptyset(&state_->mask);
  // What kills by default, including what batch schedulers send ahead of
  // a suspension or a kill: SIGUSR1/SIGUSR2 (SGE's -notify, Slurm's
  // --signal), SIGXCPU (a CPU time limit), SIGALRM. SIGQUIT keeps its core
  // dump. (SIGXFSZ is ignored by main(): blocked, it would stay pending on
  // the thread that wrote and kill the process once the mask is restored.)
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGXCPU, SIGALRM}) {
    sigaddset(&state_->mask, sig);
  }
  pthread_sigmask(SIG_BLOCK, &state_->mask, &state_->old_mask);
  std::shared_ptr<State> state = state_;
  state_->thread = std::thread([state] {
    SetThreadName("rs-signals");
    state->Loop();
  });
}

InterruptGuard::~InterruptGuard() {
  {
    absl::MutexLock lock(&state_->mu);
    state_->stop = true;
  }
  state_->thread.join();
  pthread_sigmask(SIG_SETMASK, &state_->old_mask, nullptr);
}

const std::atomic<bool>& InterruptGuard::cancelled() const { return state_->cancelled; }
int InterruptGuard::signal_number() const { return state_->signal.load(); }

void InterruptGuard::Register(const std::string& path) {
  absl::MutexLock lock(&state_->mu);
  state_->paths.insert(path);
}

void InterruptGuard::Unregister(const std::string& path) {
  absl::MutexLock lock(&state_->mu);
  state_->paths.erase(path);
}

absl::Status InterruptGuard::Publish(const std::string& path,
                                     absl::FunctionRef<absl::Status()> publish) {
  absl::MutexLock lock(&state_->mu);
  // Under mu: ForceCleanupAndExit also holds it until _exit, so a forced
  // exit either happens before this check (and the output stays partial)
  // or after the guard is disarmed below (and does nothing).
  if (state_->signal.load() != 0) {
    return absl::CancelledError("interrupted before the output was committed");
  }
  absl::Status status = publish();
  if (status.ok()) {
    state_->paths.erase(path);
    state_->disarmed = true;
  }
  return status;
}

void InterruptGuard::Disarm() {
  absl::MutexLock lock(&state_->mu);
  state_->disarmed = true;
}

CancelWatch::CancelWatch(const std::atomic<bool>* cancelled, std::function<void()> on_cancel,
                         absl::Duration poll) {
  if (cancelled == nullptr) return;
  thread_ = std::thread([this, cancelled, on_cancel = std::move(on_cancel), poll] {
    SetThreadName("rs-cancel");
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        mu_.AwaitWithTimeout(absl::Condition(&stop_), poll);
        if (stop_) return;
      }
      if (cancelled->load()) {
        on_cancel();
        return;
      }
    }
  });
}

CancelWatch::~CancelWatch() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void RemovePathQuietly(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace rocksort
