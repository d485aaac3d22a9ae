// TempStore: the temporary DB (temp_db_internal.h) planned by
// options_plan_internal.h, written in batches spread over lanes, merged in
// the background while loading (background_merger_internal.h), merged down
// after loading (merge_plan_internal.h), and read back through one merge
// of the lanes' iterators.
#include "store/store.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/allocator.h"
#include "common/status_macros.h"
#include "common/thread_usage.h"
#include "rocksdb/convenience.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "rocksdb/listener.h"
#include "rocksdb/sst_file_manager.h"
#include "rocksdb/write_batch.h"
#include "rocksdb/write_buffer_manager.h"
#include "store/background_merger_internal.h"
#include "store/merge_plan_internal.h"
#include "store/options_plan_internal.h"
#include "store/prefetch_fs_internal.h"
#include "store/rocksdb_log_internal.h"
#include "store/run_reader_internal.h"
#include "store/scratch_fs_internal.h"
#include "store/temp_db_internal.h"

namespace rocksort::store {
namespace {

// How far behind the final merge's reader each run is released.
constexpr uint64_t kReleaseLag = 1 << 20;

// Counts flushes and merges and the bytes they wrote: flushes from RocksDB's
// listener callbacks (background threads), merges (all CompactFiles, which
// reports through its CompactionJobInfo out-parameter, not through
// OnCompactionCompleted) from the callers. Tells the attached background
// merger about each flush and the record bytes its run holds.
class DbStatsListener : public rocksdb::EventListener {
 public:
  void OnFlushCompleted(rocksdb::DB* /*db*/, const rocksdb::FlushJobInfo& info) override {
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(info.file_path, ec);
    absl::MutexLock lock(&mu_);
    ++flushes_;
    flush_bytes_ += ec ? 0 : size;
    if (merger_ != nullptr) merger_->Notify(info.table_properties.raw_value_size);
  }
  // Until Detach returns, each flush calls merger->Notify().
  void Attach(BackgroundMerger* merger) {
    absl::MutexLock lock(&mu_);
    merger_ = merger;
  }
  void Detach() { Attach(nullptr); }
  int flushes() {
    absl::MutexLock lock(&mu_);
    return flushes_;
  }
  // A merge; `after_loading` for the merges down to the final merge's runs.
  void AddMerge(uint64_t bytes, bool after_loading) {
    absl::MutexLock lock(&mu_);
    ++compactions_;
    compaction_bytes_ += bytes;
    if (after_loading) manual_bytes_ += bytes;
  }
  void Fill(StoreReport* report) {
    absl::MutexLock lock(&mu_);
    report->runs_flushed = flushes_;
    report->flush_bytes = flush_bytes_;
    report->compactions = compactions_;
    report->compaction_bytes = compaction_bytes_;
    report->intermediate_merge_bytes = manual_bytes_;
  }

 private:
  absl::Mutex mu_;
  int flushes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t flush_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int compactions_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t compaction_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t manual_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // Part of compaction_bytes_.
  BackgroundMerger* merger_ ABSL_GUARDED_BY(mu_) = nullptr;
};

// The write buffer manager (options_plan.cc) stalls the loader until a
// flush frees memtable memory. If a flush fails (a full disk), RocksDB stops
// the DB and no memory is ever freed: this listener lifts the cap so the
// stalled write returns and the next one reports the error, instead of
// waiting forever.
class ReleaseStallOnError : public rocksdb::EventListener {
 public:
  explicit ReleaseStallOnError(std::shared_ptr<rocksdb::WriteBufferManager> manager)
      : manager_(std::move(manager)) {}
  void OnBackgroundError(rocksdb::BackgroundErrorReason /*reason*/,
                         rocksdb::Status* error) override {
    if (error != nullptr && !error->ok()) {
      manager_->SetBufferSize(std::numeric_limits<size_t>::max() / 2);
    }
  }

 private:
  const std::shared_ptr<rocksdb::WriteBufferManager> manager_;
};

// The number of sorted runs in each lane.
std::vector<int> RunsPerLane(rocksdb::DB* db,
                             const std::vector<rocksdb::ColumnFamilyHandle*>& lanes) {
  std::vector<int> runs;
  for (rocksdb::ColumnFamilyHandle* lane : lanes) {
    runs.push_back(static_cast<int>(SortedRuns(db, lane).size()));
  }
  return runs;
}

// Merges after loading in one lane: while it has more runs than the final
// merge may read from it, merge the first window of the plan that rewrites
// the fewest bytes (PlanMergeDown, at most `fan_in` runs each), then plan
// again. `after_merge` is called with the bytes each merge wrote. Stops
// with Aborted between merges once `stop` (another lane failed) is set.
absl::StatusOr<int> MergeDown(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* lane, int max_runs,
                              int fan_in, rocksdb::CompressionType compression,
                              const std::atomic<bool>* cancelled, const std::atomic<bool>& stop,
                              const std::function<void(uint64_t)>& after_merge) {
  int merges = 0;
  for (;;) {
    std::vector<rocksdb::SstFileMetaData> runs = SortedRuns(db, lane);
    std::vector<uint64_t> run_bytes;
    for (const rocksdb::SstFileMetaData& run : runs) run_bytes.push_back(run.size);
    const std::vector<MergeWindow> plan = PlanMergeDown(run_bytes, max_runs, fan_in);
    if (plan.empty()) return merges;
    if (cancelled != nullptr && cancelled->load()) {
      return absl::CancelledError("interrupted while merging runs");
    }
    if (stop.load()) return absl::AbortedError("stopped: another lane's merge failed");
    ASSIGN_OR_RETURN(
        const rocksdb::CompactionJobInfo info,
        MergeRuns(db, lane, runs, plan.front(), compression, "merging sorted runs failed"));
    ++merges;
    after_merge(info.stats.total_output_bytes);
  }
}

// MergeDown on every lane at once, one thread per lane (the calling thread
// takes the first). The first lane to fail stops the others after their
// current merge. Returns the number of merges, or that first failure.
absl::StatusOr<int> MergeDownLanes(rocksdb::DB* db,
                                   const std::vector<rocksdb::ColumnFamilyHandle*>& lanes,
                                   int max_runs_per_lane, int fan_in,
                                   rocksdb::CompressionType compression,
                                   const std::atomic<bool>* cancelled,
                                   const std::function<void(uint64_t)>& after_merge) {
  std::vector<absl::StatusOr<int>> results(lanes.size(), 0);
  std::atomic<bool> stop{false};
  auto merge_lane = [&](size_t i) {
    if (i > 0) SetThreadName("rs-merge");
    results[i] = MergeDown(db, lanes[i], max_runs_per_lane, fan_in, compression, cancelled, stop,
                           after_merge);
    if (!results[i].ok()) stop.store(true);
  };
  {
    std::vector<std::thread> workers;
    for (size_t i = 1; i < lanes.size(); ++i) workers.emplace_back(merge_lane, i);
    if (!lanes.empty()) merge_lane(0);
    for (std::thread& t : workers) t.join();
  }
  int merges = 0;
  absl::Status failure;  // The lane that failed, not the ones it stopped.
  for (const absl::StatusOr<int>& r : results) {
    if (r.ok()) {
      merges += *r;
    } else if (failure.ok() || absl::IsAborted(failure)) {
      failure = r.status();
    }
  }
  if (!failure.ok()) return failure;
  return merges;
}

}  // namespace

class TempStore::Impl {
 public:
  explicit Impl(const StoreOptions& options) : options_(options) {}

  ~Impl() {
    if (merger_ != nullptr) {
      stats_->Detach();
      // Interrupted: stop the running merge instead of waiting for it.
      if (cancelled() && temp_ != nullptr && temp_->db() != nullptr) {
        rocksdb::CancelAllBackgroundWork(temp_->db(), false);
      }
      merger_->Stop().IgnoreError();
    }
    stop_merges_.reset();  // Before the DB closes.
    merger_.reset();
  }

  absl::Status Open() {
    PolicyInput input;
    input.memory_budget = options_.memory_budget;
    input.threads = options_.threads;
    input.size_hint = options_.size_hint;
    input.allow_compaction = options_.allow_compaction;
    input.disk = options_.disk;
    input.run_compression = options_.run_compression;
    input.request_bytes = options_.request_bytes;
    input.open_files = options_.open_files;
    plan_ = MakePlan(input);
    // RocksDB reads runs a block at a time; the prefetch file system reads
    // them ahead in the page cache, as the plan says for each kind of merge.
    // Under it, nothing is synced and deletes do not wait: the database is
    // scratch (scratch_fs_internal.h).
    scratch_fs_ = std::make_shared<ScratchFileSystem>(rocksdb::FileSystem::Default());
    prefetch_fs_ = std::make_shared<PrefetchFileSystem>(scratch_fs_, /*readers=*/2);
    prefetch_fs_->SetReadahead(plan_.background_readahead.chunk, plan_.background_readahead.lead,
                               PrefetchFileSystem::FirstRead::kWholeChunk);
    env_ = rocksdb::NewCompositeEnv(prefetch_fs_);
    plan_.options.env = env_.get();
    report_.plan = DescribePlan(plan_);
    report_.compaction_mode = plan_.compaction == CompactionMode::kOff       ? "off"
                              : plan_.compaction == CompactionMode::kPlanned ? "planned"
                                                                             : "adaptive";
    report_.lanes = plan_.lanes;

    // RocksDB's own accounting: an event listener counts flushes and
    // compactions, the SstFileManager tracks the size of the runs on disk.
    stats_ = std::make_shared<DbStatsListener>();
    plan_.options.listeners.push_back(stats_);
    run_indexes_ = std::make_shared<RunIndexCache>();
    plan_.options.listeners.push_back(
        std::make_shared<RunIndexListener>(scratch_fs_, run_indexes_));
    fresh_runs_ = std::make_shared<FreshRunListener>(scratch_fs_);
    fresh_runs_->set_enabled(plan_.fresh_runs_merged);
    plan_.options.listeners.push_back(fresh_runs_);
    if (plan_.options.write_buffer_manager != nullptr) {
      plan_.options.listeners.push_back(
          std::make_shared<ReleaseStallOnError>(plan_.options.write_buffer_manager));
    }
    // On the store's Env: RocksDB deletes runs through the SstFileManager, and
    // they must reach ScratchFileSystem::DeleteFile.
    sst_files_.reset(rocksdb::NewSstFileManager(env_.get()));
    plan_.options.sst_file_manager = sst_files_;
    // RocksDB's warnings and errors reach the log with -v; nothing is
    // logged to a file (rocksdb_log_internal.h).
    plan_.options.info_log = std::make_shared<CallbackLogger>(
        options_.verbose ? rocksdb::InfoLogLevel::WARN_LEVEL
                         : rocksdb::InfoLogLevel::NUM_INFO_LOG_LEVELS,
        options_.log ? [log = options_.log](
                           const std::string& line) { log(absl::StrCat("rocksdb: ", line)); }
                     : std::function<void(const std::string&)>());
    ASSIGN_OR_RETURN(
        temp_, TempDb::Create(options_.dir_prefix, plan_.options, plan_.lanes, options_.registry));
    temp_->set_await_deletes([fs = scratch_fs_] { fs->WaitForDeletes(); });
    if (plan_.options.use_direct_io_for_flush_and_compaction && !temp_->direct_writes()) {
      plan_.options.use_direct_io_for_flush_and_compaction = false;  // Refused by the FS.
      if (plan_.raw_runs_if_disk_keeps_up) {
        plan_.raw_runs_if_disk_keeps_up = false;  // Nothing measures the disk then.
        RETURN_IF_ERROR(SetRunCompression(plan_.merged_compression));
      }
      report_.plan = DescribePlan(plan_);
    }
    if (plan_.raw_runs_if_disk_keeps_up &&
        !RoomForRawRuns(options_.size_hint, 0, FreeScratchBytes().value_or(0))) {
      RETURN_IF_ERROR(SetRunCompression(plan_.merged_compression));
      report_.plan = DescribePlan(plan_);
    }
    WarnIfShortOfSpace();
    if (plan_.memtable_chunks != nullptr) {
      // The memtables' chunks are faulted in ahead of the loader, up to what
      // the memtables can hold (huge_chunks_internal.h); 16 MiB ahead.
      uint64_t bytes = options_.memory_budget;
      if (options_.size_hint > 0) bytes = std::min(bytes, options_.size_hint);
      plan_.memtable_chunks->StartPrefault(/*ahead=*/8, bytes / HugeChunkPool::kChunkBytes);
    }

    batch_ = std::make_unique<rocksdb::WriteBatch>(plan_.batch_bytes + (size_t{1} << 20));
    write_options_.disableWAL = true;  // Scratch data: the input is the log.

    // Merges while loading (compaction planned or adaptive). Detached from
    // the listener and stopped on every way out, before the DB closes.
    BackgroundMergeOptions merge_options;
    merge_options.min_width = plan_.merge_fan_in;
    merge_options.max_width = plan_.merge_max_fan_in;
    merge_options.max_runs_per_lane = plan_.max_final_runs_per_lane;
    merge_options.expected_runs_per_lane =
        (plan_.expected_runs + plan_.lanes - 1) / std::max(1, plan_.lanes);
    merge_options.expected_bytes = plan_.expected_runs == 0 ? 0 : options_.size_hint;
    merge_options.workers = plan_.background_merges;
    merge_options.compression = plan_.merged_compression;
    merge_options.cancelled = options_.cancelled;
    merger_ = std::make_unique<BackgroundMerger>(
        db(), lanes(), merge_options, [this](uint64_t bytes_written) {
          SampleTempBytes();
          stats_->AddMerge(bytes_written, /*after_loading=*/false);
        });
    stats_->Attach(merger_.get());
    if (plan_.compaction == CompactionMode::kPlanned) merger_->Start();
    run_compression_pending_ = plan_.raw_runs_if_disk_keeps_up;
    load_start_ = std::chrono::steady_clock::now();
    return absl::OkStatus();
  }

  const std::string& dir() const { return temp_->dir(); }
  size_t batch_bytes() const { return plan_.batch_bytes; }

  absl::Status Add(absl::string_view key, const record::EncodedRecord& record) {
    rocksdb::Slice parts[6];
    for (int i = 0; i < record.num_parts; ++i) {
      parts[i] = rocksdb::Slice(record.parts[i].data(), record.parts[i].size());
    }
    const rocksdb::Slice key_slice(key.data(), key.size());
    rocksdb::Status s = batch_->Put(lanes()[lane_], rocksdb::SliceParts(&key_slice, 1),
                                    rocksdb::SliceParts(parts, record.num_parts));
    if (!s.ok()) return FromRocks("writing to the temporary database failed", s);
    return absl::OkStatus();
  }

  absl::Status CommitBatch() {
    const auto start = std::chrono::steady_clock::now();
    if (batch_->Count() > 0) {
      loaded_bytes_ += batch_->GetDataSize();
      rocksdb::Status s = db()->Write(write_options_, batch_.get());
      if (!s.ok()) return FromRocks("writing to the temporary database failed", s);
      RotateLane();
      batch_->Clear();
    }
    if (run_compression_pending_) MaybeChangeRunCompression();
    const auto written = std::chrono::steady_clock::now();
    report_.write_seconds += std::chrono::duration<double>(written - start).count();
    if (cancelled()) return absl::CancelledError("interrupted while loading");
    SampleTempBytes();
    // Keep the merges' backlog within one merge per lane.
    const absl::Status backlog =
        merger_->AwaitBacklog(static_cast<uint64_t>(plan_.merge_max_fan_in));
    report_.merge_wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - written).count();
    RETURN_IF_ERROR(backlog);
    MaybeStartAdaptiveMerging();
    return absl::OkStatus();
  }

  absl::Status FinishLoading() {
    // From here on, a signal stops the merge that is running: the checks
    // between merges come too late, as a merge at a large -m takes minutes,
    // far beyond the interrupt guard's grace period. CompactFiles in
    // RocksDB 7.8 cannot be cancelled alone, but it stops at the next key
    // once background work is cancelled (the flag DB::Close sets). Not
    // while loading: a write stalled for memory would wait for a flush
    // that never comes.
    rocksdb::DB* const db = this->db();
    stop_merges_ = std::make_unique<CancelWatch>(
        options_.cancelled, [db] { rocksdb::CancelAllBackgroundWork(db, /*wait=*/false); });
    // Let the running merge finish, flush the last memtables so their
    // memory is free for the merges after loading, then settle the runs.
    stats_->Detach();
    // The last runs are read by the merges below or the final merge, not
    // merged away moments after their flush: written back as usual.
    fresh_runs_->set_enabled(false);
    RETURN_IF_ERROR(merger_->Stop());
    if (cancelled()) return absl::CancelledError("interrupted while merging runs");
    if (plan_.final_merge_reads_memtables) {
      ASSIGN_OR_RETURN(const bool kept, KeepMemtablesForTheFinalMerge());
      if (kept) return absl::OkStatus();
    }
    rocksdb::FlushOptions flush;
    flush.wait = true;
    flush.allow_write_stall = true;
    if (rocksdb::Status s = db->Flush(flush, lanes()); !s.ok()) {
      return FromRocks(absl::StrCat("flushing to ", dir(), " failed"), s);
    }
    SampleTempBytes();
    ReleaseFreedMemory();  // The memtables' blocks, kept by the heap while loading.
    if (plan_.memtable_chunks != nullptr) plan_.memtable_chunks->Trim();  // And their chunks.
    report_.runs_after_load_per_lane = RunsPerLane(db, lanes());
    // The memtables are gone: the merges down to K runs (one per lane at
    // once) may be wider than the background ones, with the readahead their
    // share of the post-load memory allows.
    prefetch_fs_->SetReadahead(plan_.merge_down_readahead.chunk, plan_.merge_down_readahead.lead,
                               PrefetchFileSystem::FirstRead::kWholeChunk);
    ASSIGN_OR_RETURN(report_.intermediate_merges,
                     MergeDownLanes(db, lanes(), plan_.max_final_runs_per_lane,
                                    plan_.merge_down_fan_in, plan_.merged_compression,
                                    options_.cancelled, [this](uint64_t bytes_written) {
                                      SampleTempBytes();
                                      stats_->AddMerge(bytes_written, /*after_loading=*/true);
                                    }));
    report_.runs_merged_per_lane = RunsPerLane(db, lanes());
    final_readahead_ = FinalReadahead(plan_, report_.runs_merged());
    report_.final_readahead = final_readahead_.chunk;
    ReleaseFreedMemory();  // The merges' buffers.
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<SortedReader>> NewReader() {
    // Every run of every lane, each read by a cursor of its own and merged
    // by one loser tree (run_reader_internal.h), not by DB iterators.
    std::vector<rocksdb::SstFileMetaData> files;
    if (kept_memtables_.has_value()) {
      files = std::move(kept_memtables_->runs);
    } else {
      for (rocksdb::ColumnFamilyHandle* lane : lanes()) {
        for (rocksdb::SstFileMetaData& run : SortedRuns(db(), lane)) {
          files.push_back(std::move(run));
        }
      }
    }
    DropRunsFromCacheIfShort(files);
    prefetch_fs_->SetReadahead(final_readahead_.chunk, final_readahead_.lead,
                               PrefetchFileSystem::FirstRead::kStaggered);
    std::vector<std::unique_ptr<SortedCursor>> runs;
    for (const rocksdb::SstFileMetaData& run : files) {
      bool index_read = false;
      ASSIGN_OR_RETURN(std::unique_ptr<RunCursor> cursor,
                       RunCursor::Open(prefetch_fs_.get(), run.db_path + run.name,
                                       run_indexes_.get(), &index_read));
      report_.final_index_reads += index_read ? 1 : 0;
      runs.push_back(std::move(cursor));
    }
    if (kept_memtables_.has_value()) {
      for (std::unique_ptr<MemtableCursor>& memtables : kept_memtables_->cursors) {
        runs.push_back(std::move(memtables));
      }
      kept_memtables_.reset();
    }
    // The final merge reads each run once, front to back, and the runs go
    // after it: what it has passed is freed as it goes (scratch_fs_internal.h).
    // Every cursor has read its run's footer and index: from here on only
    // data blocks are read.
    prefetch_fs_->SetReleaseBehind(
        kReleaseLag, [fs = scratch_fs_](const std::string& path, uint64_t offset, uint64_t length) {
          fs->ReleaseRange(path, offset, length);
        });
    final_stalls_start_ = prefetch_fs_->read_stalls();
    auto merger = std::make_unique<RunMerger>(std::move(runs), report_.final_readahead);
    RETURN_IF_ERROR(merger->Start());
    return std::unique_ptr<SortedReader>(std::move(merger));
  }

  absl::Status Destroy() {
    stop_merges_.reset();
    return temp_ == nullptr ? absl::OkStatus() : temp_->Destroy();
  }

  StoreReport report() {
    StoreReport report = report_;
    stats_->Fill(&report);
    absl::MutexLock lock(&peak_mu_);
    report.peak_temp_bytes = peak_temp_bytes_;
    report.released_bytes = scratch_fs_ == nullptr ? 0 : scratch_fs_->released_bytes();
    if (final_stalls_start_.has_value()) {
      const PrefetchFileSystem::ReadStalls now = prefetch_fs_->read_stalls();
      report.final_stalled_reads = now.reads - final_stalls_start_->reads;
      report.final_stalled_seconds = now.seconds - final_stalls_start_->seconds;
    }
    return report;
  }

 private:
  rocksdb::DB* db() const { return temp_->db(); }
  const std::vector<rocksdb::ColumnFamilyHandle*>& lanes() const { return temp_->lanes(); }
  bool cancelled() const {
    return options_.cancelled != nullptr && options_.cancelled->load(std::memory_order_relaxed);
  }

  void Log(const std::string& line) const {
    if (options_.log) options_.log(line);
  }

  // Where every lane's runs and memtables fit the final merge's fan-in,
  // the final merge reads the memtables from memory: the open ones are
  // never flushed and read back, and the merge need not wait for the
  // flushes under way, which finish in the background (their runs are not
  // read). The memtables' iterators and the list of runs must show the same
  // moment: both are taken again if a flush ended in between (a lane's
  // RocksDB super version changed). False where the memtables do not fit:
  // the caller flushes them.
  absl::StatusOr<bool> KeepMemtablesForTheFinalMerge() {
    const auto super_versions = [this] {
      std::vector<uint64_t> numbers;
      for (rocksdb::ColumnFamilyHandle* lane : lanes()) {
        uint64_t number = 0;
        db()->GetIntProperty(lane, rocksdb::DB::Properties::kCurrentSuperVersionNumber, &number);
        numbers.push_back(number);
      }
      return numbers;
    };
    // Loading is over: iterators over the open memtables sort them in place.
    plan_.memtable_factory->FinishWrites();
    for (;;) {
      const std::vector<uint64_t> before = super_versions();
      KeptMemtables kept;
      int memtables = 0;
      for (size_t i = 0; i < lanes().size(); ++i) {
        rocksdb::ColumnFamilyHandle* const lane = lanes()[i];
        uint64_t open_entries = 0;
        uint64_t sealed = 0;
        db()->GetIntProperty(lane, rocksdb::DB::Properties::kNumEntriesActiveMemTable,
                             &open_entries);
        db()->GetIntProperty(lane, rocksdb::DB::Properties::kNumImmutableMemTable, &sealed);
        const int lane_memtables = static_cast<int>(sealed) + (open_entries > 0 ? 1 : 0);
        std::vector<rocksdb::SstFileMetaData> runs = SortedRuns(db(), lane);
        if (static_cast<int>(runs.size()) + lane_memtables > plan_.max_final_runs_per_lane) {
          return false;
        }
        kept.runs_per_lane.push_back(static_cast<int>(runs.size()));
        for (rocksdb::SstFileMetaData& run : runs) kept.runs.push_back(std::move(run));
        if (lane_memtables == 0) continue;
        memtables += lane_memtables;
        rocksdb::ReadOptions read;
        read.read_tier = rocksdb::kMemtableTier;
        read.fill_cache = false;
        kept.cursors.push_back(std::make_unique<MemtableCursor>(
            std::unique_ptr<rocksdb::Iterator>(db()->NewIterator(read, lane)),
            absl::StrCat("lane ", i, " of ", dir())));
      }
      if (super_versions() != before) continue;  // A flush ended meanwhile.
      report_.runs_after_load_per_lane = kept.runs_per_lane;
      report_.runs_merged_per_lane = kept.runs_per_lane;
      report_.memtables_at_final_merge = memtables;
      final_readahead_ =
          FinalReadahead(plan_, report_.runs_merged() + static_cast<int>(kept.cursors.size()));
      report_.final_readahead = final_readahead_.chunk;
      kept_memtables_ = std::move(kept);
      SampleTempBytes();
      ReleaseFreedMemory();
      if (plan_.memtable_chunks != nullptr) plan_.memtable_chunks->Trim();  // The spare chunks.
      return true;
    }
  }

  // Called from the loader's and the merges' threads.
  void SampleTempBytes() {
    const uint64_t total = sst_files_->GetTotalSize();
    absl::MutexLock lock(&peak_mu_);
    peak_temp_bytes_ = std::max(peak_temp_bytes_, total);
  }

  // Batches go to one lane until RocksDB seals that lane's memtable (it was
  // full: a sorted run is being flushed), then to the next, so the lanes
  // receive runs in turn. A write that saw the lane's active memtable hold
  // fewer entries than after the previous write had RocksDB seal the
  // memtable while applying it. (RocksDB seals a full memtable at the start
  // of the next write, so the batch of that write starts the lane's next
  // run; at the end each lane may hold one such short run.)
  void RotateLane() {
    if (lanes().size() < 2) return;
    uint64_t entries = 0;
    db()->GetIntProperty(lanes()[lane_], rocksdb::DB::Properties::kNumEntriesActiveMemTable,
                         &entries);
    if (entries <= lane_entries_) {
      lane_ = (lane_ + 1) % lanes().size();
      db()->GetIntProperty(lanes()[lane_], rocksdb::DB::Properties::kNumEntriesActiveMemTable,
                           &entries);
    }
    lane_entries_ = entries;
  }

  // Adaptive mode: the input size is unknown (a pipe). Once more runs exist
  // than the final merge reads efficiently, merge them in the background.
  void MaybeStartAdaptiveMerging() {
    if (plan_.compaction != CompactionMode::kAdaptive || report_.adaptive_compaction_started) {
      return;
    }
    // A string property ("rocksdb.num-files-at-level0" is not an int one).
    uint64_t runs = 0;
    for (rocksdb::ColumnFamilyHandle* lane : lanes()) {
      std::string value;
      if (db()->GetProperty(lane, "rocksdb.num-files-at-level0", &value)) {
        runs += std::strtoull(value.c_str(), nullptr, 10);
      }
    }
    if (runs > static_cast<uint64_t>(plan_.adaptive_trigger_runs)) {
      merger_->Start();
      report_.adaptive_compaction_started = true;
      if (options_.verbose) {
        Log(absl::StrFormat("%d runs flushed: background merging started", runs));
      }
    }
  }

  // The runs' compression from now on: set on every lane, and in plan_.
  absl::Status SetRunCompression(rocksdb::CompressionType type) {
    RETURN_IF_ERROR(temp_->SetRunCompression(type));
    plan_.options.compression = type;
    return absl::OkStatus();
  }

  // Free bytes of the filesystem under the directory; nullopt where
  // statvfs fails.
  std::optional<uint64_t> FreeScratchBytes() const {
    struct statvfs fs;
    if (::statvfs(dir().c_str(), &fs) != 0) return std::nullopt;
    return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  }

  // SortPlan::raw_runs_if_disk_keeps_up: decided once, when the first run
  // is written; the flushes that begin afterwards write the runs
  // uncompressed if RawRunsPay says so, else with the merged runs'
  // compression. A failure to change the option leaves the runs as they
  // were and says so.
  void MaybeChangeRunCompression() {
    if (stats_->flushes() == 0) return;
    run_compression_pending_ = false;
    RawRunsInput in;
    const ScratchFileSystem::DirectWrites writes = scratch_fs_->direct_writes();
    in.written_bytes = writes.bytes;
    in.write_seconds = writes.seconds;
    in.loaded_bytes = loaded_bytes_;
    in.load_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start_).count();
    in.size_hint = options_.size_hint;
    in.free_bytes = FreeScratchBytes().value_or(0);
    const rocksdb::CompressionType before = plan_.options.compression;
    const rocksdb::CompressionType after =
        RawRunsPay(in) ? rocksdb::kNoCompression : plan_.merged_compression;
    const std::string why = absl::StrFormat(
        "the disk wrote runs at %.0f MB/s, the load made records at %.0f MB/s, %d MiB free",
        in.write_seconds > 0 ? in.written_bytes / in.write_seconds / 1e6 : 0.0,
        in.loaded_bytes / in.load_seconds / 1e6, in.free_bytes >> 20);
    std::string choice = RunCompressionName(after);
    if (after != before) {
      if (absl::Status s = SetRunCompression(after); !s.ok()) {
        choice = absl::StrCat(RunCompressionName(before), " (", s.message(), ")");
      }
    }
    report_.run_compression_choice =
        absl::StrCat(choice, " after ", stats_->flushes(), " run(s) (", RunCompressionName(before),
                     " until then): ", why);
    if (options_.verbose) Log(absl::StrCat("runs ", report_.run_compression_choice));
  }

  // A notice when the filesystem under the directory has less free space
  // than the sort may need (ExpectedScratchPeak).
  void WarnIfShortOfSpace() const {
    if (options_.size_hint == 0) return;
    // Data that one memtable holds is then never written (FinishLoading).
    if (plan_.final_merge_reads_memtables &&
        options_.size_hint <= plan_.options.write_buffer_size) {
      return;
    }
    const std::optional<uint64_t> free = FreeScratchBytes();
    if (!free.has_value()) return;
    const uint64_t free_bytes = *free;
    const uint64_t expected_peak =
        ExpectedScratchPeak(options_.size_hint, options_.run_compression);
    if (free_bytes < expected_peak) {
      Log(absl::StrFormat(
          "warning: %s has %d MiB free; sorting about %d MiB of data may need up to %d MiB of "
          "temporary space (use -T elsewhere)",
          dir(), free_bytes >> 20, options_.size_hint >> 20, expected_peak >> 20));
    }
  }

  // The final merge's prefetched chunks live in the page cache
  // (prefetch_fs_internal.h) beside whatever the runs' writing left there:
  // the last runs written, clean, and more than the cache holds in a small
  // memory cgroup. When the runs are more than half of what the cache can
  // hold for this process (common/memory_info.h), those pages are dropped
  // before the merge's first reads, so that reclaim takes them and not the
  // chunks just read ahead, which are then read again in small requests.
  // Measured on the emulated disk at -m 32M in a cgroup of 448 MiB: half
  // the cgroup's limit hits and 13% fewer read requests, the same wall
  // time (docs/benchmarks.md, Synthetic input). Runs that fit stay: the
  // merge then reads them from the cache.
  void DropRunsFromCacheIfShort(const std::vector<rocksdb::SstFileMetaData>& files) {
    uint64_t run_bytes = 0;
    for (const rocksdb::SstFileMetaData& file : files) run_bytes += file.size;
    const CacheRoom room = options_.cache_room ? options_.cache_room() : CacheRoom{};
    report_.cache_room_bytes = room.bytes;
    report_.cache_room_source = room.source;
    if (room.bytes == 0 || run_bytes <= room.bytes / 2) return;
    for (const rocksdb::SstFileMetaData& file : files) {
      if (ScratchFileSystem::DropCachedPages(file.db_path + file.name)) {
        report_.runs_dropped_from_cache += 1;
      }
    }
  }

  const StoreOptions options_;
  // The file system and Env under the DB: declared before temp_, so that
  // they outlive it.
  std::shared_ptr<ScratchFileSystem> scratch_fs_;
  std::shared_ptr<FreshRunListener> fresh_runs_;
  // Each run's index, read as it was written, for the final merge.
  std::shared_ptr<RunIndexCache> run_indexes_;
  std::shared_ptr<PrefetchFileSystem> prefetch_fs_;
  std::unique_ptr<rocksdb::Env> env_;
  SortPlan plan_;
  Readahead final_readahead_;
  // The prefetch file system's stalled reads when the final merge began.
  std::optional<PrefetchFileSystem::ReadStalls> final_stalls_start_;
  StoreReport report_;
  std::shared_ptr<DbStatsListener> stats_;
  std::shared_ptr<rocksdb::SstFileManager> sst_files_;
  std::unique_ptr<TempDb> temp_;
  // Declared after temp_: the merger and the watch stop before the DB closes.
  std::unique_ptr<BackgroundMerger> merger_;
  std::unique_ptr<CancelWatch> stop_merges_;
  // What KeepMemtablesForTheFinalMerge leaves NewReader: the runs and an
  // iterator over each lane's memtables (declared after temp_: they close
  // before the DB).
  struct KeptMemtables {
    std::vector<rocksdb::SstFileMetaData> runs;
    std::vector<int> runs_per_lane;
    std::vector<std::unique_ptr<MemtableCursor>> cursors;
  };
  std::optional<KeptMemtables> kept_memtables_;
  std::unique_ptr<rocksdb::WriteBatch> batch_;
  // For MaybeChangeRunCompression: still to decide; when loading began;
  // the bytes of the batches written since.
  bool run_compression_pending_ = false;
  std::chrono::steady_clock::time_point load_start_;
  uint64_t loaded_bytes_ = 0;
  rocksdb::WriteOptions write_options_;
  size_t lane_ = 0;            // The lane being filled.
  uint64_t lane_entries_ = 0;  // Its active memtable's entries after the last write.
  absl::Mutex peak_mu_;
  uint64_t peak_temp_bytes_ ABSL_GUARDED_BY(peak_mu_) = 0;
};

absl::StatusOr<std::unique_ptr<TempStore>> TempStore::Create(const StoreOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  RETURN_IF_ERROR(impl->Open());
  return std::unique_ptr<TempStore>(new TempStore(std::move(impl)));
}

TempStore::TempStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TempStore::~TempStore() = default;

const std::string& TempStore::dir() const { return impl_->dir(); }
size_t TempStore::batch_bytes() const { return impl_->batch_bytes(); }
absl::Status TempStore::Add(absl::string_view key, const record::EncodedRecord& record) {
  return impl_->Add(key, record);
}
absl::Status TempStore::CommitBatch() { return impl_->CommitBatch(); }
absl::Status TempStore::FinishLoading() { return impl_->FinishLoading(); }
absl::StatusOr<std::unique_ptr<SortedReader>> TempStore::NewReader() { return impl_->NewReader(); }
absl::Status TempStore::Destroy() { return impl_->Destroy(); }
StoreReport TempStore::report() const { return impl_->report(); }

}  // namespace rocksort::store
