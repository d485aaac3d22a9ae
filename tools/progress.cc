#include "progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/thread_usage.h"

namespace rocksort::tools {
namespace {

// Erases from the cursor to the end of the line (ANSI EL).
constexpr char kEraseToEnd[] = "\x1b[K";

// `value` scaled down by `base` until below it, with three significant
// digits and the unit of its scale: 1.23, 12.3, 123.
std::string Scaled(uint64_t n, double base, const char* const* units, int num_units,
                   const char* separator) {
  double value = static_cast<double>(n);
  int unit = 0;
  while (value >= base && unit + 1 < num_units) {
    value /= base;
    ++unit;
  }
  if (unit == 0) return absl::StrCat(n, *units[0] != '\0' ? separator : "", units[0]);
  // Rounding may carry into the next unit (999.7k prints as 1.00M).
  if (std::round(value) >= base && unit + 1 < num_units) {
    value /= base;
    ++unit;
  }
  const std::string digits = value < 9.995   ? absl::StrFormat("%.2f", value)
                             : value < 99.95 ? absl::StrFormat("%.1f", value)
                                             : absl::StrFormat("%.0f", value);
  return absl::StrCat(digits, separator, units[unit]);
}

const char* PhaseLabel(pipeline::Phase phase) {
  switch (phase) {
    case pipeline::Phase::kLoad:
      return "reading";
    case pipeline::Phase::kMerge:
      return "merging";
    case pipeline::Phase::kEmit:
      return "writing";
  }
  return "?";
}

// The rate and ETA fields for `done` of `total` (total 0: no ETA) after
// `seconds`; none in the first second, when they would only be noise.
void AppendRateAndEta(const ProgressSample& s, double fraction, std::vector<std::string>* fields) {
  if (s.seconds < 1) return;
  fields->push_back(absl::StrCat(
      FormatCount(static_cast<uint64_t>(static_cast<double>(s.records) / s.seconds)), " rec/s"));
  if (fraction > 0 && fraction < 1) {
    fields->push_back(absl::StrCat("ETA ", FormatDuration(s.seconds * (1 - fraction) / fraction)));
  }
}

}  // namespace

std::string FormatCount(uint64_t n) {
  static const char* const kUnits[] = {"", "k", "M", "G", "T", "P"};
  return Scaled(n, 1000, kUnits, 6, "");
}

std::string FormatBytes(uint64_t n) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  return Scaled(n, 1024, kUnits, 6, " ");
}

std::string FormatDuration(double seconds) {
  const int64_t s = std::llround(std::max(0.0, seconds));
  if (s < 3600) return absl::StrFormat("%d:%02d", s / 60, s % 60);
  return absl::StrFormat("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
}

std::string FormatStatusLine(const ProgressSample& s) {
  std::string head = absl::StrCat("rocksort: ", PhaseLabel(s.phase));
  std::vector<std::string> fields;
  double fraction = 0;
  switch (s.phase) {
    case pipeline::Phase::kLoad:
      if (s.bytes_total > 0) {
        fraction = std::min(1.0, static_cast<double>(s.bytes) / static_cast<double>(s.bytes_total));
        absl::StrAppendFormat(&head, " %.1f%%", 100 * fraction);
        fields.push_back(absl::StrCat(FormatCount(s.records), " records"));
        fields.push_back(absl::StrCat(FormatBytes(s.bytes), " of ", FormatBytes(s.bytes_total)));
      } else {
        fields.push_back(absl::StrCat(FormatCount(s.records), " records"));
        fields.push_back(FormatBytes(s.bytes));
      }
      AppendRateAndEta(s, fraction, &fields);
      break;
    case pipeline::Phase::kMerge:
      fields.push_back(absl::StrCat(FormatCount(s.records), " records"));
      fields.push_back(FormatDuration(s.seconds));
      break;
    case pipeline::Phase::kEmit:
      if (s.records_total > 0) {
        fraction =
            std::min(1.0, static_cast<double>(s.records) / static_cast<double>(s.records_total));
        absl::StrAppendFormat(&head, " %.1f%%", 100 * fraction);
        fields.push_back(
            absl::StrCat(FormatCount(s.records), " of ", FormatCount(s.records_total), " records"));
      } else {
        fields.push_back(absl::StrCat(FormatCount(s.records), " records"));
      }
      fields.push_back(FormatBytes(s.bytes));
      AppendRateAndEta(s, fraction, &fields);
      break;
  }
  return absl::StrCat(head, "  ", absl::StrJoin(fields, "  "));
}

ProgressDisplay::ProgressDisplay(const pipeline::SortProgress& progress, int fd,
                                 std::chrono::milliseconds interval)
    : progress_(progress), fd_(fd), interval_(interval), thread_([this] { Run(); }) {}

void ProgressDisplay::OnPhase(pipeline::Phase phase) {
  absl::MutexLock lock(&mu_);
  started_ = true;
  phase_ = phase;
  phase_start_ = Clock::now();
}

void ProgressDisplay::Print(const std::string& line) {
  absl::MutexLock lock(&mu_);
  EraseLocked();
  WriteLocked(line + "\n");
}

void ProgressDisplay::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    stop_ = true;
  }
  thread_.join();
  absl::MutexLock lock(&mu_);
  EraseLocked();
}

void ProgressDisplay::Run() {
  SetThreadName("rs-progress");
  absl::MutexLock lock(&mu_);
  for (;;) {
    // Wakes early only to stop.
    const absl::Time deadline = absl::Now() + absl::FromChrono(interval_);
    while (!stop_ && absl::Now() < deadline) {
      mu_.AwaitWithDeadline(absl::Condition(&stop_), deadline);
    }
    if (stop_) return;
    if (started_) DrawLocked();
  }
}

void ProgressDisplay::DrawLocked() {
  ProgressSample s;
  s.phase = phase_;
  s.seconds = std::chrono::duration<double>(Clock::now() - phase_start_).count();
  const uint64_t loaded = progress_.records_loaded.load(std::memory_order_relaxed);
  if (phase_ == pipeline::Phase::kEmit) {
    s.records = progress_.records_written.load(std::memory_order_relaxed);
    s.records_total = loaded;
    s.bytes = progress_.record_bytes_written.load(std::memory_order_relaxed);
  } else {
    s.records = loaded;
    s.bytes = progress_.input_bytes.load(std::memory_order_relaxed);
    s.bytes_total = progress_.input_size.load(std::memory_order_relaxed);
  }
  std::string line = FormatStatusLine(s);
  // A line longer than the terminal would wrap, and "\r" would then redraw
  // only its last row.
  struct winsize size;
  if (::ioctl(fd_, TIOCGWINSZ, &size) == 0 && size.ws_col > 1 && line.size() >= size.ws_col) {
    line.resize(size.ws_col - 1);
  }
  WriteLocked(absl::StrCat("\r", line, kEraseToEnd));
  drawn_ = true;
}

void ProgressDisplay::EraseLocked() {
  if (!drawn_) return;
  WriteLocked(absl::StrCat("\r", kEraseToEnd));
  drawn_ = false;
}

void ProgressDisplay::WriteLocked(const std::string& text) {
  // One write per update; a display must never fail the sort, so errors
  // (a closed terminal) are ignored.
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace rocksort::tools
