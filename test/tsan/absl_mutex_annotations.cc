// ThreadSanitizer annotations for Debian's (uninstrumented) abseil Mutex.
// Linked into every executable of a ROCKSORT_TSAN=ON build, nowhere else.
//
// Why: absl::Mutex locks with atomics and futex system calls inside
// libabsl_synchronization.so. Debian builds that library without TSan, so
// TSan never learns that a Mutex was taken or released and reports every
// access to mutex-guarded data from two threads as a race (over a hundred
// false reports in emitter_test alone). abseil's own TSan annotations are
// compiled only into a TSan build of abseil itself.
//
// How: the executable defines the Mutex member functions rocksort uses. The
// static linker binds rocksort's calls to these definitions instead of the
// shared library's (ordinary ELF symbol interposition); each one tells TSan
// what happens, with the same __tsan_mutex_* calls an instrumented abseil
// makes, and calls the library's real function, found with
// dlsym(RTLD_NEXT). Between a pre_ and post_ annotation TSan ignores memory
// accesses, which also covers the Condition functions absl::Mutex evaluates
// inside Lock/Unlock/Await, possibly on another thread than the waiter's.
//
// Members not wrapped here (CondVar, the deadline waits) are not used
// by rocksort; code that starts using them must add them here, or TSan will
// report false races on the data they guard.

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "sanitizer/tsan_interface.h"

#if !ABSL_OPTION_USE_INLINE_NAMESPACE
#error "the mangled names below assume abseil's inline namespace"
#endif

namespace {

#define ROCKSORT_TSAN_STRINGIFY_INNER(x) #x
#define ROCKSORT_TSAN_STRINGIFY(x) ROCKSORT_TSAN_STRINGIFY_INNER(x)

// The library's definition of absl::<inline ns>::Mutex::<member>, given the
// member's mangled tail (name length, name, parameter types).
void* RealMember(const char* tail) {
  const std::string ns = ROCKSORT_TSAN_STRINGIFY(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string symbol = "_ZN4absl" + std::to_string(ns.size()) + ns + "5Mutex" + tail;
  void* f = dlsym(RTLD_NEXT, symbol.c_str());
  if (f == nullptr) {
    std::fprintf(stderr, "absl_mutex_annotations: %s not found: %s\n", symbol.c_str(), dlerror());
    std::abort();
  }
  return f;
}

using MemberFn = void (*)(absl::Mutex*);
using BoolMemberFn = bool (*)(absl::Mutex*);
using AwaitFn = void (*)(absl::Mutex*, const absl::Condition&);
using AwaitWithTimeoutFn = bool (*)(absl::Mutex*, const absl::Condition&, absl::Duration);
using LockWhenFn = void (*)(absl::Mutex*, const absl::Condition&);

// A member function's `this` is its first argument in the Itanium C++ ABI,
// so the real members are called as plain functions taking the Mutex.
#define ROCKSORT_REAL(type, tail)                                   \
  ([] {                                                             \
    static const type f = reinterpret_cast<type>(RealMember(tail)); \
    return f;                                                       \
  }())

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

Mutex::~Mutex() {
  __tsan_mutex_destroy(this, 0);
  ROCKSORT_REAL(MemberFn, "D2Ev")(this);
}

void Mutex::Lock() {
  __tsan_mutex_pre_lock(this, 0);
  ROCKSORT_REAL(MemberFn, "4LockEv")(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::Unlock() {
  __tsan_mutex_pre_unlock(this, 0);
  ROCKSORT_REAL(MemberFn, "6UnlockEv")(this);
  __tsan_mutex_post_unlock(this, 0);
}

// LockWhen and LockWhenWithTimeout (absl::Notification's waits) return
// holding the mutex, whether the condition or the timeout ended the wait.
void Mutex::LockWhen(const Condition& cond) {
  __tsan_mutex_pre_lock(this, 0);
  ROCKSORT_REAL(LockWhenFn, "8LockWhenERKNS0_9ConditionE")(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}
bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  __tsan_mutex_pre_lock(this, 0);
  const bool met =
      ROCKSORT_REAL(AwaitWithTimeoutFn, "19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE")(
          this, cond, timeout);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}
bool Mutex::TryLock() {
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = ROCKSORT_REAL(BoolMemberFn, "7TryLockEv")(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed),
                         0);
  return locked;
}

void Mutex::ReaderLock() {
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  ROCKSORT_REAL(MemberFn, "10ReaderLockEv")(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

void Mutex::ReaderUnlock() {
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  ROCKSORT_REAL(MemberFn, "12ReaderUnlockEv")(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

// Await releases the (exclusively held) mutex while it waits and holds it
// again when it returns: an unlock followed by a lock.
void Mutex::Await(const Condition& cond) {
  __tsan_mutex_pre_unlock(this, 0);
  __tsan_mutex_post_unlock(this, 0);
  __tsan_mutex_pre_lock(this, 0);
  ROCKSORT_REAL(AwaitFn, "5AwaitERKNS0_9ConditionE")(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}

// The same, whether it returns for the condition or for the timeout.
bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  __tsan_mutex_pre_unlock(this, 0);
  __tsan_mutex_post_unlock(this, 0);
  __tsan_mutex_pre_lock(this, 0);
  const bool met =
      ROCKSORT_REAL(AwaitWithTimeoutFn, "16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE")(
          this, cond, timeout);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

ABSL_NAMESPACE_END
}  // namespace absl
