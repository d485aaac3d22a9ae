#include "common/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace rocksort {
namespace {

// The commit point and the guard's forced exit exclude each other. Run in a
// child process (a death test forks one): the guard must be created before
// any other thread, so that every thread blocks the signals.
TEST(InterruptGuardDeathTest, NoPublishAfterASignal) {
  EXPECT_EXIT(
      {
        InterruptGuard guard(absl::Seconds(30));
        ::kill(::getpid(), SIGINT);
        while (!guard.cancelled().load()) ::usleep(1000);
        bool published = false;
        const absl::Status s = guard.Publish("p", [&] {
          published = true;
          return absl::OkStatus();
        });
        std::_Exit(!published && s.code() == absl::StatusCode::kCancelled ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(InterruptGuardDeathTest, PublishedRunIsNotForcedToExitByALateSignal) {
  EXPECT_EXIT(
      {
        InterruptGuard guard(absl::Milliseconds(50));
        const absl::Status s = guard.Publish("p", [] { return absl::OkStatus(); });
        // A signal after the commit point: the grace period passes without
        // a forced _exit(130), because there is nothing left to undo.
        ::kill(::getpid(), SIGTERM);
        while (!guard.cancelled().load()) ::usleep(1000);
        ::usleep(500 * 1000);
        std::_Exit(s.ok() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(InterruptGuardDeathTest, UnpublishedRunIsForcedToExitAfterTheGracePeriod) {
  EXPECT_EXIT(
      {
        InterruptGuard guard(absl::Milliseconds(50));
        ::kill(::getpid(), SIGTERM);
        ::usleep(5 * 1000 * 1000);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(128 + SIGTERM), "terminated by signal");
}

TEST(CancelWatchTest, CallsOnceAfterTheFlagIsSet) {
  std::atomic<bool> cancelled{false};
  absl::Notification called;
  std::atomic<int> calls{0};
  {
    CancelWatch watch(
        &cancelled,
        [&] {
          ++calls;
          called.Notify();
        },
        absl::Milliseconds(1));
    ::usleep(20 * 1000);
    EXPECT_EQ(calls.load(), 0);  // Not before.
    cancelled.store(true);
    EXPECT_TRUE(called.WaitForNotificationWithTimeout(absl::Seconds(10)));
    ::usleep(20 * 1000);
  }
  EXPECT_EQ(calls.load(), 1);
}

TEST(CancelWatchTest, NeverCallsAfterItIsGone) {
  std::atomic<bool> cancelled{false};
  std::atomic<int> calls{0};
  const absl::Time start = absl::Now();
  {
    // A long poll: the destructor must not wait for it.
    CancelWatch watch(
        &cancelled, [&] { ++calls; }, absl::Seconds(60));
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  cancelled.store(true);
  ::usleep(20 * 1000);
  EXPECT_EQ(calls.load(), 0);
  CancelWatch no_flag(nullptr, [&] { ++calls; });  // Nothing to watch.
  EXPECT_EQ(calls.load(), 0);
}

}  // namespace
}  // namespace rocksort
