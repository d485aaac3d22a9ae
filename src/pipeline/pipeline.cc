#include "pipeline/pipeline.h"

#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/hts_handles.h"
#include "common/open_files.h"
#include "common/paths.h"
#include "common/record_checksum.h"
#include "common/status_macros.h"
#include "common/thread_usage.h"
#include "keycodec/keycodec.h"
#include "loader/loader.h"
#include "output/output.h"

namespace rocksort::pipeline {
namespace {

// How often the emit loop polls for cancellation.
constexpr uint64_t kCancelCheckInterval = 4096;

// The fewest free descriptors a sort starts with. The plan gives RocksDB
// half of them when few are free (store/options_plan.cc), and RocksDB
// raises max_open_files to at least 20 (a table cache of 10 runs); with 32
// free that leaves 12 for its own files, the files being written and the
// final merge's readers of at most a quarter of them.
constexpr uint64_t kMinStoreFiles = 32;

bool Cancelled(const std::atomic<bool>* cancelled) {
  return cancelled != nullptr && cancelled->load(std::memory_order_relaxed);
}

// Measures one phase: wall time and the CPU time of each thread group.
class PhaseMeter {
 public:
  PhaseMeter(Phase phase, const SortObserver& observer, SortReport* report)
      : phase_(phase),
        report_(report),
        start_(absl::Now()),
        before_(SnapshotThreads()),
        process_before_(ProcessCpuSeconds()) {
    if (observer.on_phase) observer.on_phase(phase);
  }
  // Records the phase.
  void End() {
    PhaseReport phase;
    phase.phase = phase_;
    phase.seconds = absl::ToDoubleSeconds(absl::Now() - start_);
    phase.peak_rss_bytes = PeakRssBytes();
    const std::map<std::string, ThreadGroupUsage> live = UsageBetween(before_, SnapshotThreads());
    const double process = ProcessCpuSeconds() - process_before_;
    for (const auto& [name, usage] : live) {
      if (usage.cpu_seconds <= 0) continue;
      phase.threads.push_back({name, usage.threads, usage.cpu_seconds});
    }
    if (const double ended = EndedThreadsCpuSeconds(process, live); ended > 0) {
      phase.threads.push_back({"ended threads", 0, ended});
    }
    report_->phases.push_back(std::move(phase));
  }

 private:
  const Phase phase_;
  SortReport* const report_;
  const absl::Time start_;
  const ThreadSnapshot before_;
  const double process_before_;
};

// The output header: the input's, with the order's @HD fields as samtools
// 1.23.1 writes them (an @HD line is added when missing; SS and GO removed
// where the order sets none) and an @PG line unless disabled.
absl::StatusOr<HeaderPtr> MakeOutputHeader(const sam_hdr_t& in, const SortOptions& options) {
  HeaderPtr h(sam_hdr_dup(&in));
  if (h == nullptr) return absl::ResourceExhaustedError("can't copy the header");
  if (absl::Status s = keycodec::ApplySortOrder(options.order, h.get()); !s.ok()) {
    // htslib parses the header text only now: a malformed line or a
    // duplicate @SQ name fails here (samtools sort fails the same way).
    return absl::InvalidArgumentError(absl::StrCat(
        s.message(),
        ": the header does not parse (a malformed line or a duplicate @SQ name; -v shows "
        "htslib's reason)"));
  }
  if (options.add_pg && sam_hdr_add_pg(h.get(), "rocksort", "VN", options.version.c_str(), "CL",
                                       options.command_line.c_str(), nullptr) != 0) {
    return absl::InvalidArgumentError("can't add the @PG line to the header");
  }
  return h;
}

// The store's options from the sort's: where it goes, its memory, the disk
// under it and the size it plans for (reported in *report).
store::StoreOptions PlanStore(const SortOptions& options, const std::atomic<bool>* cancelled,
                              CleanupRegistry* registry, const SortObserver& observer,
                              SortReport* report) {
  store::StoreOptions s;
  s.dir_prefix = TempDirPrefix(options);
  // The request size is the device's even when --disk overrides its kind.
  const std::string parent = std::filesystem::path(s.dir_prefix).parent_path().string();
  const DiskDetection detected = DetectDiskKind(parent.empty() ? "." : parent);
  report->disk = options.disk.value_or(detected.kind);
  report->disk_reason = options.disk.has_value() ? "--disk" : detected.reason;
  report->disk_request_bytes = detected.request_bytes;
  s.disk = report->disk;
  s.request_bytes = detected.request_bytes;
  s.memory_budget = report->memory_budget = MemoryBudget(options);
  s.threads = std::max(1, options.threads);
  if (options.size_hint.has_value()) {
    s.size_hint = *options.size_hint;
    s.allow_compaction = *options.size_hint != 0;
    report->size_hint_source = *options.size_hint != 0 ? "-s" : "none (compaction off)";
  } else {
    s.size_hint = loader::EstimateUncompressedSize(options.inputs);
    report->size_hint_source = s.size_hint == 0             ? "unknown (adaptive)"
                               : options.inputs.size() == 1 ? "estimated from the input file"
                                                            : "estimated from the input files";
  }
  report->size_hint = s.size_hint;
  s.run_compression = options.run_compression;
  s.registry = registry;
  s.cancelled = cancelled;
  s.log = observer.on_notice;
  s.verbose = options.verbosity > 0;
  return s;
}

// The descriptors the store may open once the inputs and outputs are open
// (0: no limit). FIFO and stdin inputs hold theirs until read; with too
// many of them under a low limit the sort fails now, not when a run can't
// be opened mid-load.
absl::StatusOr<uint64_t> FilesLeftForStore(const OpenFiles& files) {
  if (files.limit == 0) return uint64_t{0};
  if (files.free() < kMinStoreFiles) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "too many open files: %d of the open-file limit of %d are open, leaving %d, and the "
        "temporary database needs at least %d (inputs from pipes, FIFOs and stdin stay open "
        "until read); raise the limit (ulimit -n)",
        files.in_use, files.limit, files.free(), kMinStoreFiles));
  }
  return files.free();
}

// Reads every record of `reader` into `store`, a batch at a time, and
// publishes the counts after each batch to `progress` (may be null). Adds
// the wall time spent reading to *read_seconds.
absl::Status Load(loader::InputSetReader& reader, const loader::InputSet& inputs,
                  store::TempStore& store, SortProgress* progress, double* read_seconds) {
  for (;;) {
    const auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(const size_t added, reader.ReadBatch(store.batch_bytes(), store));
    *read_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (progress != nullptr) {
      progress->records_loaded.store(reader.stats().records, std::memory_order_relaxed);
      progress->input_bytes.store(inputs.progress().bytes_read(), std::memory_order_relaxed);
    }
    RETURN_IF_ERROR(store.CommitBatch());
    if (added == 0) return absl::OkStatus();
  }
}

// Streams the store's records into `sink` and tallies them; publishes the
// tally to `progress` (may be null) every kCancelCheckInterval records.
absl::StatusOr<RecordTally> Emit(store::SortedReader& reader, output::RecordSink& sink,
                                 const std::atomic<bool>* cancelled, SortProgress* progress) {
  RecordTally tally;
  RecordChecksum checksum;
  absl::string_view record;
  while (reader.Next(&record)) {
    RETURN_IF_ERROR(sink.Write(record));
    checksum.AddRecord(record.data(), record.size());
    ++tally.records;
    tally.bytes += record.size();
    if (tally.records % kCancelCheckInterval == 0) {
      if (Cancelled(cancelled)) return absl::CancelledError("interrupted while writing the output");
      if (progress != nullptr) {
        progress->records_written.store(tally.records, std::memory_order_relaxed);
        progress->record_bytes_written.store(tally.bytes, std::memory_order_relaxed);
      }
    }
  }
  if (progress != nullptr) {
    progress->records_written.store(tally.records, std::memory_order_relaxed);
    progress->record_bytes_written.store(tally.bytes, std::memory_order_relaxed);
  }
  RETURN_IF_ERROR(reader.status());
  tally.checksum = checksum.value();
  return tally;
}

// OUT may be an input file, as with samtools: the inputs are read to their
// end before the output, a new file, replaces it. Not a FIFO or device
// written in place while it is being read (checked before the input is
// opened: opening a FIFO waits for a writer).
absl::Status CheckOutputIsNotStreamedInput(const SortOptions& options) {
  struct stat in_st, out_st;
  if (!output::OutputFile::WritesInPlace(options.output) ||
      ::stat(options.output.c_str(), &out_st) != 0) {
    return absl::OkStatus();
  }
  for (const std::string& input : options.inputs) {
    if (input != "-" && ::stat(input.c_str(), &in_st) == 0 && in_st.st_dev == out_st.st_dev &&
        in_st.st_ino == out_st.st_ino) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "output \"%s\" is an input, which is not a regular file", options.output));
    }
  }
  return absl::OkStatus();
}

// Opens the inputs, each read ahead as its own device prefers, and
// combines their headers.
absl::StatusOr<std::unique_ptr<loader::InputSet>> OpenInputs(const SortOptions& options,
                                                             int threads) {
  std::vector<uint64_t> chunks;
  for (const std::string& input : options.inputs) {
    const DiskDetection disk = input == "-" ? DiskDetection{} : DetectDiskKind(input);
    chunks.push_back(loader::InputReadaheadChunk(disk.request_bytes, disk.max_read_bytes));
  }
  loader::InputOptions input_options;
  input_options.threads = threads;
  input_options.reference = options.reference;
  input_options.format_options = options.input_format_options;
  return loader::InputSet::Open(options.inputs, input_options, chunks);
}

// The output file and, with --write-index, its index file.
struct Outputs {
  std::unique_ptr<output::OutputFile> data;
  std::unique_ptr<output::OutputFile> index;
};

absl::StatusOr<Outputs> CreateOutputs(const SortOptions& options, CleanupRegistry* registry) {
  Outputs out;
  ASSIGN_OR_RETURN(out.data, output::OutputFile::Create(options.output, registry));
  if (!options.write_index) return out;
  if (out.data->is_stream()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--write-index: %s is not a file; an index needs the output written to a file",
        out.data->name()));
  }
  const std::string index_path = options.index_output.empty()
                                     ? options.output + options.format.index_suffix()
                                     : options.index_output;
  ASSIGN_OR_RETURN(out.index, output::OutputFile::Create(index_path, registry));
  if (out.index->is_stream()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--write-index: the index %s is not a regular file", out.index->name()));
  }
  return out;
}

void FinishReport(absl::Time start, SortReport* report) {
  report->wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  report->cpu_seconds = ProcessCpuSeconds();
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  report->peak_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
}

absl::Status Sort(const SortOptions& options, const std::atomic<bool>* cancelled,
                  CleanupRegistry* registry, const SortObserver& observer, SortReport* report) {
  const int threads = std::max(1, options.threads);
  report->order = options.order.Describe();
  store::StoreOptions store_options = PlanStore(options, cancelled, registry, observer, report);
  auto notice = [&](const std::string& line) {
    if (observer.on_notice) observer.on_notice(line);
  };

  // Open: inputs, header, output, store. An unwritable output fails before
  // hours are spent on the sort.
  RETURN_IF_ERROR(CheckOutputIsNotStreamedInput(options));
  ASSIGN_OR_RETURN(std::unique_ptr<loader::InputSet> inputs, OpenInputs(options, threads));
  // Messages about the header name the input it came from (one input) or
  // none (several: the header is theirs combined).
  const std::string header_source = inputs->size() == 1 ? inputs->name(0) + ": " : "";
  absl::StatusOr<HeaderPtr> made_header = MakeOutputHeader(inputs->header(), options);
  if (!made_header.ok()) {
    return absl::Status(made_header.status().code(),
                        absl::StrCat(header_source, made_header.status().message()));
  }
  HeaderPtr out_header = *std::move(made_header);
  // A header BAM cannot hold (a reference longer than 2^31 - 1, from SAM
  // text) fails now, not after the sort.
  if (absl::StatusOr<std::string> encoded = output::EncodeBamHeader(*out_header); !encoded.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(header_source, encoded.status().message()));
  }
  // So does an output htslib can't write as asked (a CRAM reference that
  // can't be loaded, an index for uncompressed SAM).
  RETURN_IF_ERROR(output::CheckSink(options.format, *out_header,
                                    options.output == "-" ? "stdout" : options.output,
                                    options.write_index));
  ASSIGN_OR_RETURN(const std::unique_ptr<keycodec::KeyEncoder> keys,
                   keycodec::MakeKeyEncoder(options.order, inputs->header()));
  ASSIGN_OR_RETURN(Outputs outputs, CreateOutputs(options, registry));
  ASSIGN_OR_RETURN(store_options.open_files, FilesLeftForStore(CountOpenFiles()));
  if (options.verbosity > 0) {
    notice(absl::StrFormat(
        "order %s; disk profile %s (%s; %s); memory budget %d bytes; size %d (%s)", report->order,
        report->disk == DiskKind::kHdd ? "hdd" : "ssd", report->disk_reason,
        report->disk_request_bytes == 0
            ? "request size unknown"
            : absl::StrCat("requests of up to ", report->disk_request_bytes / 1024, " KiB"),
        report->memory_budget, report->size_hint, report->size_hint_source));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<store::TempStore> store,
                   store::TempStore::Create(store_options));
  report->temp_dir = store->dir();
  if (options.verbosity > 0) {
    notice(absl::StrCat("plan: ", store->report().plan));
    notice(absl::StrCat("temporary database in ", store->dir()));
  }

  // Load.
  if (observer.progress != nullptr) {
    observer.progress->input_size.store(inputs->progress().total_bytes(),
                                        std::memory_order_relaxed);
  }
  PhaseMeter load(Phase::kLoad, observer, report);
  // The reader closes each input (its decode threads and buffers) once
  // read to its end.
  loader::InputSetReader reader(*inputs, *keys);
  const absl::Status loaded =
      Load(reader, *inputs, *store, observer.progress, &report->read_seconds);
  load.End();
  RETURN_IF_ERROR(loaded);
  const loader::LoadStats load_stats = reader.stats();
  for (const loader::InputSetReader::TruncatedInput& t : reader.missing_eof_marker()) {
    report->inputs_missing_eof_marker.push_back({t.name, t.records});
  }
  report->records = load_stats.records;
  // As samtools: the minimiser order of input with no placed read is
  // unsorted (SO:unsorted SS:unsorted:minhash), known only now.
  if (options.order.kind == keycodec::OrderKind::kMinimiser && load_stats.placed_records == 0) {
    RETURN_IF_ERROR(keycodec::ApplySortOrder(options.order, out_header.get(), /*placed=*/false));
  }
  report->record_bytes = load_stats.record_bytes;
  const RecordTally read_tally{load_stats.records, load_stats.record_bytes, load_stats.checksum};

  // Merge.
  PhaseMeter merge(Phase::kMerge, observer, report);
  const absl::Status settled = store->FinishLoading();
  merge.End();
  report->store = store->report();
  RETURN_IF_ERROR(settled);

  // Emit.
  PhaseMeter emit(Phase::kEmit, observer, report);
  ASSIGN_OR_RETURN(std::unique_ptr<store::SortedReader> sorted, store->NewReader());
  output::SinkOptions sink_options;
  sink_options.threads = threads;
  // While this thread waits for a run's read (on a rotating disk a seek
  // plus readahead / ~180 MB/s: ~20 ms for 2 MiB), the compressors live on
  // the queue; each uses up ~60 MB/s at the default level, so the queue
  // holds readahead x threads / 2 bytes of records.
  sink_options.queue_bytes = sorted->readahead() * threads / 2;
  if (outputs.index != nullptr) {
    sink_options.index_path = outputs.index->partial_path();
    sink_options.index_name = outputs.index->name();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<output::RecordSink> sink,
                   output::OpenSink(options.format, *out_header, outputs.data->fd(),
                                    outputs.data->name(), sink_options));
  absl::StatusOr<RecordTally> written = Emit(*sorted, *sink, cancelled, observer.progress);
  emit.End();
  sorted.reset();  // Before the store it reads.
  report->store = store->report();
  RETURN_IF_ERROR(written.status());
  // The queue may hold many blocks that Finish compresses first: a signal
  // that came after the last record must not wait for them.
  if (Cancelled(cancelled)) return absl::CancelledError("interrupted while writing the output");
  RETURN_IF_ERROR(sink->Finish());
  report->output_bytes = sink->bytes_written();
  report->emit_waits = sink->waits();
  RETURN_IF_ERROR(VerifyIntegrity(read_tally, *written, outputs.data->name()));
  // A signal while the last blocks were compressed still means no output.
  if (Cancelled(cancelled)) return absl::CancelledError("interrupted while writing the output");

  // Commit. Everything that can fail comes before the commit point (the
  // rename), so a run that fails, or is interrupted, leaves no output, and
  // one whose output appeared has succeeded.
  // The output's fsync and the removal of the runs both wait for the disk
  // (its cache flush; discards on a filesystem mounted with `discard`), so
  // they run side by side.
  absl::Status destroyed;
  std::thread destroyer([&store, &destroyed] {
    SetThreadName("rs-cleanup");
    destroyed = store->Destroy();
  });
  absl::Status finished = outputs.data->Finish();
  if (finished.ok() && outputs.index != nullptr) finished = outputs.index->Finish();
  destroyer.join();
  RETURN_IF_ERROR(finished);
  RETURN_IF_ERROR(destroyed);
  return outputs.data->Commit(outputs.index.get());
}

}  // namespace

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kLoad:
      return "load";
    case Phase::kMerge:
      return "merge";
    case Phase::kEmit:
      return "emit";
  }
  return "?";
}

absl::Status VerifyIntegrity(const RecordTally& loaded, const RecordTally& emitted,
                             const std::string& output_name) {
  if (emitted.records == loaded.records && emitted.bytes == loaded.bytes &&
      emitted.checksum == loaded.checksum) {
    return absl::OkStatus();
  }
  return absl::DataLossError(
      absl::StrFormat("%s: integrity check failed: wrote %d records (%d bytes, checksum %016x) but "
                      "loaded %d (%d bytes, checksum %016x); output discarded",
                      output_name, emitted.records, emitted.bytes, emitted.checksum, loaded.records,
                      loaded.bytes, loaded.checksum));
}

std::string TempDirPrefix(const SortOptions& options) {
  // PATH.rocksort.XXXXXX, with PATH shortened to fit (the store adds the X's).
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
  if (!output::OutputFile::WritesInPlace(options.output)) {
    return beside(output::OutputFile::TargetPath(options.output));
  }
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string dir = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : ".";
  return dir + "/rocksort.";
}

uint64_t MemoryBudget(const SortOptions& options) {
  return options.memory_per_thread * static_cast<uint64_t>(std::max(1, options.threads));
}

absl::Status RunSort(const SortOptions& options, const std::atomic<bool>* cancelled,
                     CleanupRegistry* registry, const SortObserver& observer, SortReport* report) {
  const absl::Time start = absl::Now();
  SortReport local_report;
  if (report == nullptr) report = &local_report;
  const absl::Status status = Sort(options, cancelled, registry, observer, report);
  FinishReport(start, report);
  return status;
}

}  // namespace rocksort::pipeline
