#include "pipeline/pipeline.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "common/disk_info.h"
#include "compaction_policy/merge_plan.h"
#include "emitter/emitter.h"
#include "loader/loader.h"
#include "common/allocator.h"
#include "pipeline/background_merger.h"
#include "pipeline/rocksdb_log.h"
#include "pipeline/temp_db.h"
#include "rocksdb/convenience.h"
#include "rocksdb/listener.h"
#include "rocksdb/metadata.h"
#include "rocksdb/sst_file_manager.h"
#include "rocksdb/write_buffer_manager.h"

namespace rocksort::pipeline {
namespace {

struct HeaderDeleter {
  void operator()(sam_hdr_t* h) const { sam_hdr_destroy(h); }
};
using HeaderPtr = std::unique_ptr<sam_hdr_t, HeaderDeleter>;

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The output header: the input's, with @HD SO:coordinate (an @HD line is
// added when missing), no GO or SS (a grouping or sub-sort no longer holds
// after re-sorting; samtools drops both), and an @PG line unless disabled.
absl::StatusOr<HeaderPtr> MakeOutputHeader(const sam_hdr_t& in, const SortOptions& options) {
  HeaderPtr h(sam_hdr_dup(&in));
  if (h == nullptr) return absl::ResourceExhaustedError("can't copy the header");
  if (sam_hdr_update_hd(h.get(), "SO", "coordinate") != 0 &&
      sam_hdr_add_line(h.get(), "HD", "VN", SAM_FORMAT_VERSION, "SO", "coordinate",
                       nullptr) != 0) {
    // htslib parses the header text only now: a malformed line or a
    // duplicate @SQ name fails here (samtools sort fails the same way).
    return absl::InvalidArgumentError(
        "can't set @HD SO:coordinate: the header does not parse (a malformed line or a "
        "duplicate @SQ name; -v shows htslib's reason)");
  }
  sam_hdr_remove_tag_hd(h.get(), "GO");
  sam_hdr_remove_tag_hd(h.get(), "SS");
  if (options.add_pg &&
      sam_hdr_add_pg(h.get(), "rocksort", "VN", options.version.c_str(), "CL",
                     options.command_line.c_str(), nullptr) != 0) {
    return absl::InvalidArgumentError("can't add the @PG line to the header");
  }
  return h;
}

// The number of sorted runs in each lane.
std::vector<int> RunsPerLane(rocksdb::DB* db,
                             const std::vector<rocksdb::ColumnFamilyHandle*>& lanes) {
  std::vector<int> runs;
  for (rocksdb::ColumnFamilyHandle* lane : lanes) {
    runs.push_back(static_cast<int>(SortedRuns(db, lane).size()));
  }
  return runs;
}

// Intermediate merges in one lane: while it has more runs than the final
// merge may read from it, merge the first window of the plan that rewrites
// the fewest bytes (compaction_policy::PlanMergeDown, at most `fan_in` runs
// each), then plan again. `after_merge` is called with the bytes each merge
// wrote. Stops with Aborted between merges once `stop` (another lane failed)
// is set.
absl::StatusOr<int> MergeDown(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* lane, int max_runs,
                              int fan_in, rocksdb::CompressionType compression,
                              const std::atomic<bool>* cancelled,
                              const std::atomic<bool>& stop,
                              const std::function<void(uint64_t)>& after_merge) {
  int merges = 0;
  for (;;) {
    std::vector<rocksdb::SstFileMetaData> runs = SortedRuns(db, lane);
    std::vector<uint64_t> run_bytes;
    for (const rocksdb::SstFileMetaData& run : runs) run_bytes.push_back(run.size);
    const std::vector<compaction_policy::MergeWindow> plan =
        compaction_policy::PlanMergeDown(run_bytes, max_runs, fan_in);
    if (plan.empty()) return merges;
    if (cancelled != nullptr && cancelled->load()) {
      return absl::CancelledError("interrupted while merging runs");
    }
    if (stop.load()) return absl::AbortedError("stopped: another lane's merge failed");
    ASSIGN_OR_RETURN(const rocksdb::CompactionJobInfo info,
                     MergeRuns(db, lane, runs, plan.front(), compression,
                               "merging sorted runs failed"));
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

// Counts flushes and merges and the bytes they wrote: flushes from RocksDB's
// listener callbacks (background threads), merges (all CompactFiles, which
// reports through its CompactionJobInfo out-parameter, not through
// OnCompactionCompleted) from the callers. Tells the attached background
// merger about each flush.
class DbStatsListener : public rocksdb::EventListener {
 public:
  void OnFlushCompleted(rocksdb::DB* /*db*/, const rocksdb::FlushJobInfo& info) override {
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(info.file_path, ec);
    absl::MutexLock lock(&mu_);
    ++flushes_;
    flush_bytes_ += ec ? 0 : size;
    if (merger_ != nullptr) merger_->Notify();
  }
  // Until Detach returns, each flush calls merger->Notify().
  void Attach(BackgroundMerger* merger) {
    absl::MutexLock lock(&mu_);
    merger_ = merger;
  }
  void Detach() { Attach(nullptr); }
  // A merge while loading.
  void AddBackgroundMerge(uint64_t bytes) {
    absl::MutexLock lock(&mu_);
    ++compactions_;
    compaction_bytes_ += bytes;
  }
  // A merge after loading.
  void AddManualCompaction(uint64_t bytes) {
    absl::MutexLock lock(&mu_);
    ++compactions_;
    compaction_bytes_ += bytes;
    manual_bytes_ += bytes;
  }
  void Fill(SortReport* report) {
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

// The write buffer manager (compaction_policy.cc) stalls the loader until a
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

// Warns on stderr when the filesystem under `dir` has less free space than
// a sort of `size_hint` bytes may need (compaction_policy::ExpectedScratchPeak).
void WarnIfShortOfSpace(const std::string& dir, uint64_t size_hint,
                        compaction_policy::RunCompression compression) {
  if (size_hint == 0) return;
  struct statvfs fs;
  if (::statvfs(dir.c_str(), &fs) != 0) return;
  const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  const uint64_t expected_peak = compaction_policy::ExpectedScratchPeak(size_hint, compression);
  if (free_bytes < expected_peak) {
    std::fprintf(stderr,
                 "rocksort: warning: %s has %llu MiB free; sorting about %llu MiB of data "
                 "may need up to %llu MiB of temporary space (use -T elsewhere)\n",
                 dir.c_str(), static_cast<unsigned long long>(free_bytes >> 20),
                 static_cast<unsigned long long>(size_hint >> 20),
                 static_cast<unsigned long long>(expected_peak >> 20));
  }
}

double Seconds(absl::Time start) { return absl::ToDoubleSeconds(absl::Now() - start); }

}  // namespace

absl::Status VerifyIntegrity(const loader::LoadStats& loaded, const emitter::EmitStats& emitted,
                             const std::string& output_name) {
  if (emitted.records == loaded.records && emitted.record_bytes == loaded.record_bytes &&
      emitted.checksum == loaded.checksum) {
    return absl::OkStatus();
  }
  return absl::DataLossError(absl::StrFormat(
      "%s: integrity check failed: wrote %d records (%d bytes, checksum %016x) but "
      "loaded %d (%d bytes, checksum %016x); output discarded",
      output_name, emitted.records, emitted.record_bytes, emitted.checksum, loaded.records,
      loaded.record_bytes, loaded.checksum));
}

std::string TempDirPrefix(const SortOptions& options) {
  // PATH.rocksort.XXXXXX, with PATH shortened to fit (TempDb::Create adds
  // the X's).
  auto beside = [](const std::string& path) {
    return FitFileName(path, std::strlen(".rocksort.XXXXXX")) + ".rocksort.";
  };
  if (!options.temp_prefix.empty()) {
    if (IsDirectory(options.temp_prefix)) {
      std::string dir = options.temp_prefix;
      while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
      return dir == "/" ? "/rocksort." : dir + "/rocksort.";
    }
    return beside(options.temp_prefix);
  }
  // Beside the output, unless it is stdout or a device/FIFO written in place
  // (/dev/null): its directory is no place for temporary data.
  if (!OutputFile::WritesInPlace(options.output)) {
    return beside(OutputFile::TargetPath(options.output));
  }
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string dir = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : ".";
  return dir + "/rocksort.";
}

uint64_t MemoryBudget(const SortOptions& options) {
  return options.memory_per_thread * static_cast<uint64_t>(std::max(1, options.threads));
}

absl::Status RunSort(const SortOptions& options, const std::atomic<bool>* cancelled,
                     CleanupRegistry* registry, SortReport* report) {
  SortReport local_report;
  if (report == nullptr) report = &local_report;
  const int threads = std::max(1, options.threads);

  const std::string temp_prefix = TempDirPrefix(options);
  // The request size is the device's even when --disk overrides its kind.
  const std::string temp_parent = std::filesystem::path(temp_prefix).parent_path().string();
  const DiskDetection detected =
      DetectDiskKind(temp_parent.empty() ? "." : temp_parent);
  report->disk = options.disk.value_or(detected.kind);
  report->disk_reason = options.disk.has_value() ? "--disk" : detected.reason;
  report->disk_request_bytes = detected.request_bytes;

  compaction_policy::PolicyInput policy_input;
  policy_input.memory_budget = MemoryBudget(options);
  policy_input.threads = threads;
  if (options.size_hint.has_value()) {
    policy_input.size_hint = *options.size_hint;
    policy_input.allow_compaction = *options.size_hint != 0;
    report->size_hint_source = *options.size_hint != 0 ? "-s" : "none (compaction off)";
  } else {
    policy_input.size_hint = loader::EstimateUncompressedSize(options.input);
    report->size_hint_source =
        policy_input.size_hint != 0 ? "estimated from the input file" : "unknown (adaptive)";
  }
  report->size_hint = policy_input.size_hint;
  policy_input.disk = report->disk;
  policy_input.run_compression = options.run_compression;
  policy_input.request_bytes = report->disk_request_bytes;
  if (struct rlimit files; getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
    policy_input.open_files = static_cast<uint64_t>(files.rlim_cur);
  }
  compaction_policy::SortPlan plan = compaction_policy::MakePlan(policy_input);
  report->compaction_mode = plan.compaction == compaction_policy::CompactionMode::kOff ? "off"
                            : plan.compaction == compaction_policy::CompactionMode::kPlanned
                                ? "planned"
                                : "adaptive";
  report->lanes = plan.lanes;
  // RocksDB's own accounting: an event listener counts flushes and
  // compactions, the SstFileManager tracks the size of the runs on disk.
  auto stats = std::make_shared<DbStatsListener>();
  plan.options.listeners.push_back(stats);
  if (plan.options.write_buffer_manager != nullptr) {
    plan.options.listeners.push_back(
        std::make_shared<ReleaseStallOnError>(plan.options.write_buffer_manager));
  }
  std::shared_ptr<rocksdb::SstFileManager> sst_files(
      rocksdb::NewSstFileManager(rocksdb::Env::Default()));
  plan.options.sst_file_manager = sst_files;
  // RocksDB's warnings and errors reach stderr with -v; nothing is logged to
  // a file (rocksdb_log.h).
  plan.options.info_log = std::make_shared<StderrLogger>(
      options.verbosity > 0 ? rocksdb::InfoLogLevel::WARN_LEVEL
                            : rocksdb::InfoLogLevel::NUM_INFO_LOG_LEVELS);
  if (options.verbosity > 0) {
    std::fprintf(stderr,
                 "rocksort: disk profile %s (%s; %s); memory budget %llu bytes; size %llu (%s); "
                 "%s\n",
                 report->disk == DiskKind::kHdd ? "hdd" : "ssd",
                 report->disk_reason.c_str(),
                 report->disk_request_bytes == 0
                     ? "request size unknown"
                     : absl::StrCat("requests of up to ", report->disk_request_bytes / 1024,
                                    " KiB")
                           .c_str(),
                 static_cast<unsigned long long>(policy_input.memory_budget),
                 static_cast<unsigned long long>(report->size_hint),
                 report->size_hint_source.c_str(), compaction_policy::DescribePlan(plan).c_str());
  }

  // OUT may be the input file, as with samtools: the input is read to its
  // end before the output, a new file, replaces it. Not a FIFO or device
  // written in place while it is being read (checked before the input is
  // opened: opening a FIFO waits for a writer).
  if (struct stat in_st, out_st;
      options.input != "-" && OutputFile::WritesInPlace(options.output) &&
      ::stat(options.input.c_str(), &in_st) == 0 && ::stat(options.output.c_str(), &out_st) == 0 &&
      in_st.st_dev == out_st.st_dev && in_st.st_ino == out_st.st_ino) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "output \"%s\" is the input, which is not a regular file", options.output));
  }
  // The input's own device decides how it is read ahead.
  const DiskDetection input_disk =
      options.input == "-" ? DiskDetection{}
                           : DetectDiskKind(options.input);
  ASSIGN_OR_RETURN(
      std::unique_ptr<loader::Input> input,
      loader::Input::Open(options.input, threads,
                          compaction_policy::InputReadaheadChunk(input_disk.request_bytes,
                                                                 input_disk.max_read_bytes),
                          options.reference));
  absl::StatusOr<HeaderPtr> made_header = MakeOutputHeader(input->header(), options);
  if (!made_header.ok()) {
    return absl::Status(made_header.status().code(),
                        absl::StrCat(input->name(), ": ", made_header.status().message()));
  }
  HeaderPtr out_header = *std::move(made_header);
  // A header BAM cannot hold (a reference longer than 2^31 - 1, from SAM
  // text) fails now, not after the sort.
  if (absl::StatusOr<std::string> encoded = emitter::EncodeBamHeader(*out_header);
      !encoded.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s", input->name(), encoded.status().message()));
  }
  // Fail on an unwritable output before spending hours on the sort.
  ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> output,
                   OutputFile::Create(options.output, registry));
  std::unique_ptr<OutputFile> index;
  if (options.write_index) {
    if (output->is_stream()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--write-index: %s is not a file; an index needs the output written to a file",
          output->name()));
    }
    const std::string index_path =
        options.index_output.empty() ? options.output + ".csi" : options.index_output;
    ASSIGN_OR_RETURN(index, OutputFile::Create(index_path, registry));
    if (index->is_stream()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--write-index: the index %s is not a regular file", index->name()));
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<TempDb> temp,
                   TempDb::Create(temp_prefix, plan.options, plan.lanes, registry));
  if (options.verbosity > 0) {
    std::fprintf(stderr, "rocksort: temporary database in %s\n", temp->dir().c_str());
  }
  WarnIfShortOfSpace(temp->dir(), report->size_hint, options.run_compression);
  rocksdb::DB* db = temp->db();
  const std::vector<rocksdb::ColumnFamilyHandle*>& lanes = temp->lanes();

  auto enter = [&](Phase phase) {
    if (options.on_phase) options.on_phase(phase);
  };

  // Load.
  enter(Phase::kLoad);
  absl::Time phase_start = absl::Now();
  loader::LoadOptions load_options;
  load_options.batch_bytes = plan.batch_bytes;
  load_options.cancelled = cancelled;
  load_options.lanes = lanes;
  // Called from the lanes' merge threads too.
  absl::Mutex peak_mu;
  auto sample_temp = [&] {
    const uint64_t total = sst_files->GetTotalSize();
    absl::MutexLock lock(&peak_mu);
    report->peak_temp_bytes = std::max(report->peak_temp_bytes, total);
  };
  // Merges while loading (compaction planned or adaptive). Detached from the
  // listener and stopped on every way out, before the DB closes.
  BackgroundMergeOptions merge_options;
  merge_options.min_width = plan.merge_fan_in;
  merge_options.max_width = plan.merge_max_fan_in;
  merge_options.max_runs_per_lane = plan.max_final_runs_per_lane;
  merge_options.expected_runs_per_lane =
      (plan.expected_runs + plan.lanes - 1) / std::max(1, plan.lanes);
  merge_options.workers = plan.background_merges;
  merge_options.compression = plan.options.compression;
  merge_options.cancelled = cancelled;
  BackgroundMerger merger(db, lanes, merge_options, [&](uint64_t bytes_written) {
    sample_temp();
    stats->AddBackgroundMerge(bytes_written);
  });
  stats->Attach(&merger);
  absl::Cleanup stop_merger = [&] {
    stats->Detach();
    // Interrupted: stop the running merge instead of waiting for it (see
    // stop_merges below; the loader has returned, nothing writes).
    if (cancelled != nullptr && cancelled->load()) rocksdb::CancelAllBackgroundWork(db, false);
    merger.Stop().IgnoreError();
  };
  if (plan.compaction == compaction_policy::CompactionMode::kPlanned) merger.Start();
  load_options.after_batch = [&](uint64_t /*records*/) -> absl::Status {
    sample_temp();
    // Keep the merges' backlog within one merge per lane.
    RETURN_IF_ERROR(merger.AwaitBacklog(static_cast<uint64_t>(plan.merge_max_fan_in)));
    // Adaptive mode: the input size is unknown (a pipe). Once more runs exist
    // than the final merge reads efficiently, merge them in the background.
    if (plan.compaction == compaction_policy::CompactionMode::kAdaptive &&
        !report->adaptive_compaction_started) {
      // A string property ("rocksdb.num-files-at-level0" is not an int one).
      uint64_t runs = 0;
      for (rocksdb::ColumnFamilyHandle* lane : lanes) {
        std::string value;
        if (db->GetProperty(lane, "rocksdb.num-files-at-level0", &value)) {
          runs += std::strtoull(value.c_str(), nullptr, 10);
        }
      }
      if (runs > static_cast<uint64_t>(plan.adaptive_trigger_runs)) {
        merger.Start();
        report->adaptive_compaction_started = true;
        if (options.verbosity > 0) {
          std::fprintf(stderr, "rocksort: %llu runs flushed: background merging started\n",
                       static_cast<unsigned long long>(runs));
        }
      }
    }
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(const loader::LoadStats loaded, loader::LoadRecords(*input, db, load_options));
  // From here on, a signal stops the merge that is running: RunSort checks
  // for one between merges only, and a merge at a large -m takes minutes,
  // far beyond the guard's grace period. CompactFiles in RocksDB 7.8 cannot
  // be cancelled alone, but it stops at the next key once background work
  // is cancelled (the flag DB::Close sets). Not while loading: a write
  // stalled for memory would wait for a flush that never comes. Declared
  // after `temp`, so gone before the DB closes.
  const CancelWatch stop_merges(cancelled,
                                [db] { rocksdb::CancelAllBackgroundWork(db, /*wait=*/false); });
  input.reset();  // Frees the decode threads and their buffers.
  report->input_missing_eof_marker = loaded.missing_eof_marker;
  report->records = loaded.records;
  report->record_bytes = loaded.record_bytes;
  report->load_seconds = Seconds(phase_start);

  // Let the running merge finish, flush the last memtables so their memory
  // is free for the merges after loading, then settle the runs.
  enter(Phase::kMerge);
  phase_start = absl::Now();
  stats->Detach();
  RETURN_IF_ERROR(merger.Stop());
  if (cancelled != nullptr && cancelled->load()) {
    return absl::CancelledError("interrupted while merging runs");
  }
  rocksdb::FlushOptions flush;
  flush.wait = true;
  flush.allow_write_stall = true;
  if (rocksdb::Status s = db->Flush(flush, lanes); !s.ok()) {
    return FromRocks(absl::StrCat("flushing to ", temp->dir(), " failed"), s);
  }
  sample_temp();
  ReleaseFreedMemory();  // The memtables' blocks, kept by the heap while loading.
  report->runs_after_load_per_lane = RunsPerLane(db, lanes);
  // The memtables are gone: the merges down to K runs (one per lane at once)
  // may be wider than the background ones, with the readahead their share
  // of the post-load memory allows.
  if (rocksdb::Status s = db->SetDBOptions(
          {{"compaction_readahead_size", std::to_string(plan.merge_down_readahead)}});
      !s.ok()) {
    return FromRocks("can't set the readahead of the merges", s);
  }
  ASSIGN_OR_RETURN(report->intermediate_merges,
                   MergeDownLanes(db, lanes, plan.max_final_runs_per_lane,
                                  plan.merge_down_fan_in, plan.options.compression, cancelled,
                                  [&](uint64_t bytes_written) {
                                    sample_temp();
                                    stats->AddManualCompaction(bytes_written);
                                  }));
  report->runs_merged_per_lane = RunsPerLane(db, lanes);
  stats->Fill(report);
  report->final_readahead = compaction_policy::FinalReadahead(plan, report->runs_merged());
  report->merge_seconds = Seconds(phase_start);

  ReleaseFreedMemory();  // The merges' buffers.

  // Emit.
  enter(Phase::kEmit);
  phase_start = absl::Now();
  emitter::EmitOptions emit_options;
  emit_options.level = options.level;
  emit_options.threads = threads;
  emit_options.readahead = report->final_readahead;
  emit_options.cancelled = cancelled;
  emit_options.lanes = lanes;
  if (index != nullptr) {
    emit_options.index_path = index->partial_path();
    emit_options.index_name = index->name();
  }
  ASSIGN_OR_RETURN(const emitter::EmitStats emitted,
                   emitter::EmitBam(db, *out_header, output->fd(), output->name(), emit_options));
  report->output_bytes = emitted.bytes_written;
  report->emit_seconds = Seconds(phase_start);
  RETURN_IF_ERROR(VerifyIntegrity(loaded, emitted, output->name()));
  // A signal while the last blocks were compressed still means no output.
  if (cancelled != nullptr && cancelled->load()) {
    return absl::CancelledError("interrupted while writing the output");
  }
  // Everything that can fail comes before the commit point (the rename), so
  // a run that fails, or is interrupted, leaves no output, and one whose
  // output appeared has succeeded.
  RETURN_IF_ERROR(output->Finish());
  if (index != nullptr) RETURN_IF_ERROR(index->Finish());
  RETURN_IF_ERROR(temp->Destroy());
  return output->Commit(index.get());
}

}  // namespace rocksort::pipeline
