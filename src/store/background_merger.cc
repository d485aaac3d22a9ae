#include "store/background_merger_internal.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "common/thread_usage.h"
#include "store/merge_plan_internal.h"

namespace rocksort::store {

absl::Status FromRocks(const std::string& what, const rocksdb::Status& s) {
  return absl::InternalError(absl::StrCat(what, ": ", s.ToString()));
}

std::vector<rocksdb::SstFileMetaData> SortedRuns(rocksdb::DB* db,
                                                 rocksdb::ColumnFamilyHandle* lane) {
  rocksdb::ColumnFamilyMetaData meta;
  db->GetColumnFamilyMetaData(lane, &meta);
  std::vector<rocksdb::SstFileMetaData> runs;
  for (const rocksdb::LevelMetaData& level : meta.levels) {
    runs.insert(runs.end(), level.files.begin(), level.files.end());
  }
  // Oldest first: RocksDB only merges L0 files that are adjacent in age.
  std::sort(runs.begin(), runs.end(),
            [](const auto& a, const auto& b) { return a.smallest_seqno < b.smallest_seqno; });
  return runs;
}

absl::StatusOr<rocksdb::CompactionJobInfo> MergeRuns(
    rocksdb::DB* db, rocksdb::ColumnFamilyHandle* lane,
    const std::vector<rocksdb::SstFileMetaData>& runs, store::MergeWindow window,
    rocksdb::CompressionType compression, const std::string& what) {
  std::vector<std::string> names;
  for (int i = window.start; i < window.start + window.width; ++i) {
    names.push_back(runs[i].name);
  }
  rocksdb::CompactionOptions compaction;
  compaction.compression = compression;
  rocksdb::CompactionJobInfo info;
  rocksdb::Status s = db->CompactFiles(compaction, lane, names, /*output_level=*/0,
                                       /*output_path_id=*/-1, nullptr, &info);
  // Background work cancelled (only on a signal, by RunSort) stops a running
  // CompactFiles and refuses a new one.
  if (s.IsShutdownInProgress()) return absl::CancelledError("interrupted while merging runs");
  if (!s.ok()) return FromRocks(what, s);
  return info;
}

BackgroundMerger::BackgroundMerger(rocksdb::DB* db, std::vector<rocksdb::ColumnFamilyHandle*> lanes,
                                   const BackgroundMergeOptions& options,
                                   std::function<void(uint64_t)> after_merge)
    : db_(db),
      lanes_(std::move(lanes)),
      options_(options),
      after_merge_(std::move(after_merge)),
      merged_(lanes_.size()),
      consumed_(lanes_.size(), 0) {}

BackgroundMerger::~BackgroundMerger() { Stop().IgnoreError(); }

void BackgroundMerger::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
  }
  if (started()) return;
  const int workers = std::clamp(options_.workers, 1, std::max(1, static_cast<int>(lanes_.size())));
  for (int w = 0; w < workers; ++w) {
    std::vector<int> owned;
    for (int lane = w; lane < static_cast<int>(lanes_.size()); lane += workers) {
      owned.push_back(lane);
    }
    workers_.emplace_back(&BackgroundMerger::Work, this, std::move(owned));
  }
}

void BackgroundMerger::Notify(uint64_t record_bytes) {
  absl::MutexLock lock(&mu_);
  ++flushes_;
  if (record_bytes != 0) {
    ++measured_runs_;
    measured_bytes_ += record_bytes;
  }
}

uint64_t BackgroundMerger::ExpectedRunsPerLane() const {
  // A run per lane measured before the first estimate (lanes flush in turn).
  const uint64_t lanes = std::max<size_t>(1, lanes_.size());
  if (options_.expected_bytes == 0 || measured_runs_ < lanes) {
    return options_.expected_runs_per_lane;
  }
  const double runs = static_cast<double>(options_.expected_bytes) *
                      static_cast<double>(measured_runs_) / static_cast<double>(measured_bytes_);
  return (static_cast<uint64_t>(std::ceil(runs)) + lanes - 1) / lanes;
}

absl::Status BackgroundMerger::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  absl::MutexLock lock(&mu_);
  return status_;
}

void BackgroundMerger::Work(std::vector<int> lanes) {
  SetThreadName("rs-merge");
  uint64_t seen = 0;
  size_t next = 0;  // Where MergeDue starts looking.
  std::vector<std::string> last_outputs;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto due = [this, &seen]()
                     ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || flushes_ != seen; };
      mu_.Await(absl::Condition(&due));
      if (stop_) return;
      seen = flushes_;
    }
    if (absl::Status s = MergeDue(lanes, &next, &last_outputs); !s.ok()) {
      absl::MutexLock lock(&mu_);
      if (status_.ok()) status_ = s;
      return;
    }
  }
}

namespace {

// Advice only: a file merged away meanwhile is simply gone.
void DropFromPageCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

}  // namespace

BackgroundMerger::LaneScan BackgroundMerger::Scan(int lane) {
  LaneScan scan;
  scan.runs = SortedRuns(db_, lanes_[lane]);
  absl::MutexLock lock(&mu_);
  std::vector<bool> fresh;
  for (const rocksdb::SstFileMetaData& run : scan.runs) {
    fresh.push_back(merged_[lane].count(run.file_number) == 0);
    scan.fresh_runs += fresh.back() ? 1 : 0;
  }
  const uint64_t flushed = consumed_[lane] + scan.fresh_runs;
  const uint64_t expected = ExpectedRunsPerLane();
  const int64_t more_runs =
      expected == 0 ? -1 : static_cast<int64_t>(expected > flushed ? expected - flushed : 0);
  scan.window = store::PickBackgroundMerge(fresh, more_runs, options_.max_runs_per_lane,
                                           options_.min_width, options_.max_width);
  return scan;
}

absl::Status BackgroundMerger::MergeDue(const std::vector<int>& lanes, size_t* next,
                                        std::vector<std::string>* last_outputs) {
  for (;;) {
    if (options_.cancelled != nullptr && options_.cancelled->load()) return absl::OkStatus();
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return absl::OkStatus();
    }
    // Of the lanes with a merge due, the one with the most fresh runs (the
    // longest backlog; on ties the one after the last lane merged), so that
    // a worker that lags behind the flushes serves its lanes in turn.
    int best_lane = -1;
    LaneScan best;
    for (size_t k = 0; k < lanes.size(); ++k) {
      const int lane = lanes[(*next + k) % lanes.size()];
      LaneScan scan = Scan(lane);
      if (!scan.window.has_value() || scan.fresh_runs <= best.fresh_runs) continue;
      best_lane = lane;
      best = std::move(scan);
    }
    if (best_lane < 0) return absl::OkStatus();
    ASSIGN_OR_RETURN(const rocksdb::CompactionJobInfo info,
                     MergeRuns(db_, lanes_[best_lane], best.runs, *best.window,
                               options_.compression, "merging sorted runs while loading failed"));
    // The merged run is read again only by the final merge: out of the page
    // cache with it, where it would push out the fresh runs the next merges
    // read. Pages still being written back stay (nothing waits for the
    // disk: the store is never synced, scratch_fs_internal.h), so the
    // previous merge's runs, written back by now, are dropped once more.
    for (const std::string& path : *last_outputs) DropFromPageCache(path);
    for (const std::string& path : info.output_files) DropFromPageCache(path);
    *last_outputs = info.output_files;
    {
      absl::MutexLock lock(&mu_);
      for (const rocksdb::CompactionFileInfo& output : info.output_file_infos) {
        merged_[best_lane].insert(output.file_number);
      }
      consumed_[best_lane] += static_cast<uint64_t>(best.window->width);
      ++merges_;
    }
    *next =
        static_cast<size_t>(std::find(lanes.begin(), lanes.end(), best_lane) - lanes.begin()) + 1;
    after_merge_(info.stats.total_output_bytes);
  }
}

absl::Status BackgroundMerger::AwaitBacklog(uint64_t max_fresh_runs) {
  if (!started()) return absl::OkStatus();
  for (;;) {
    // Only a flush or a merge changes the lanes: scan them (metadata of
    // every run) once per change, not once per batch.
    uint64_t changes;
    {
      absl::MutexLock lock(&mu_);
      changes = flushes_ + merges_;
      if (changes == clear_at_changes_ && max_fresh_runs >= clear_max_fresh_runs_) {
        return status_;
      }
    }
    bool behind = false;
    for (int lane = 0; lane < static_cast<int>(lanes_.size()) && !behind; ++lane) {
      const LaneScan scan = Scan(lane);
      behind = scan.window.has_value() && scan.fresh_runs > max_fresh_runs;
    }
    absl::MutexLock lock(&mu_);
    if (!behind) {
      clear_at_changes_ = changes;
      clear_max_fresh_runs_ = max_fresh_runs;
    }
    if (!behind || stop_ || !status_.ok()) return status_;
    if (options_.cancelled != nullptr && options_.cancelled->load()) return absl::OkStatus();
    // Until a merge completes (checking for cancellation now and then).
    const uint64_t seen = merges_;
    auto merged = [this, seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return merges_ != seen || stop_ || !status_.ok();
    };
    mu_.AwaitWithTimeout(absl::Condition(&merged), absl::Milliseconds(100));
  }
}

}  // namespace rocksort::store
