// InputSet and InputSetReader (loader.h): several inputs read as one.
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "loader/header_merge_internal.h"
#include "loader/loader.h"

namespace rocksort::loader {
namespace {

// InputSetReader reads at most this many bytes of records from an input
// before it updates InputProgress::bytes_read.
constexpr size_t kProgressStep = size_t{4} << 20;

}  // namespace

InputSet::InputSet() = default;
InputSet::~InputSet() = default;

absl::StatusOr<std::unique_ptr<InputSet>> InputSet::Open(
    const std::vector<std::string>& paths, const InputOptions& options,
    const std::vector<uint64_t>& readahead_chunks) {
  if (paths.empty()) return absl::InvalidArgumentError("no input");
  if (std::count(paths.begin(), paths.end(), "-") > 1) {
    return absl::InvalidArgumentError("stdin (\"-\") can be only one of the inputs");
  }
  std::unique_ptr<InputSet> set(new InputSet());
  bool sizes_known = true;
  uint64_t total = 0;
  HeaderMerger merger;
  for (size_t i = 0; i < paths.size(); ++i) {
    InputOptions input_options = options;
    input_options.readahead_chunk = readahead_chunks[i];
    ASSIGN_OR_RETURN(std::unique_ptr<Input> input, Input::OpenHeader(paths[i], input_options));
    sizes_known &= input->regular_file();
    total += input->size();
    set->names_.push_back(input->name());
    Source source{paths[i], std::move(input_options), input->version()};
    if (paths.size() > 1) {
      // Every regular file but the first (read at once, and whose header
      // the merger keeps) is closed until its turn. Standard input and
      // FIFOs can't be opened again and stay open.
      const bool close = i > 0 && input->regular_file();
      // Before the header is merged: merging parses it, and htslib may then
      // rebuild its text.
      if (close) source.header_hash = HeaderHash(*input->mutable_header());
      RETURN_IF_ERROR(merger.Add(input->mutable_header(), input->name()));
      if (close) input.reset();
    }
    set->sources_.push_back(std::move(source));
    set->inputs_.push_back(std::move(input));
  }
  if (paths.size() == 1) {
    // One input's header is the sort's as it is (the pipeline reports a
    // header that does not parse, naming the input).
    set->header_.reset(sam_hdr_dup(&set->inputs_[0]->header()));
    if (set->header_ == nullptr) return absl::ResourceExhaustedError("can't copy the header");
  } else {
    ASSIGN_OR_RETURN(MergedHeader merged, merger.Finish());
    set->header_ = std::move(merged.header);
    set->ids_ = std::move(merged.translations);
  }
  set->progress_.total_bytes_ = sizes_known ? total : 0;
  return set;
}

size_t InputSet::HeaderHash(sam_hdr_t& header) {
  const char* text = sam_hdr_str(&header);
  return std::hash<std::string_view>()(
      text == nullptr ? std::string_view() : std::string_view(text, sam_hdr_length(&header)));
}

absl::Status InputSet::Reopen(size_t i) {
  const absl::Status changed = absl::FailedPreconditionError(absl::StrFormat(
      "%s: the file changed after its header was read (the inputs are read one after another; "
      "an input must not change until the sort has read it)",
      names_[i]));
  // The path first: a FIFO or a truncated file put in its place must not be
  // opened (a FIFO would wait for a writer) or reported as unreadable.
  const Source& source = sources_[i];
  struct stat now;
  if (::stat(source.path.c_str(), &now) == 0 && !(Input::VersionOf(now) == source.version)) {
    return changed;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Input> input, Input::OpenHeader(source.path, source.options));
  if (!(input->version() == source.version) ||
      HeaderHash(*input->mutable_header()) != source.header_hash) {
    return changed;
  }
  inputs_[i] = std::move(input);
  return absl::OkStatus();
}

InputSetReader::InputSetReader(InputSet& inputs, const keycodec::KeyEncoder& keys)
    : inputs_(inputs), keys_(keys) {}

InputSetReader::~InputSetReader() = default;

absl::Status InputSetReader::StartNext() {
  if (inputs_.inputs_[current_] == nullptr) RETURN_IF_ERROR(inputs_.Reopen(current_));
  Input& input = *inputs_.inputs_[current_];
  RETURN_IF_ERROR(input.Start());
  // Only inputs whose IDs were renamed pay for looking at their records.
  const IdTranslation* ids = nullptr;
  if (!inputs_.ids_.empty() && inputs_.ids_[current_].renamed) ids = &inputs_.ids_[current_];
  reader_ = std::make_unique<RecordReader>(input, keys_, done_.records, ids);
  return absl::OkStatus();
}

void InputSetReader::FinishCurrent() {
  const LoadStats& s = reader_->stats();
  done_.records += s.records;
  done_.placed_records += s.placed_records;
  done_.record_bytes += s.record_bytes;
  done_.checksum += s.checksum;  // RecordChecksum sums records mod 2^64.
  done_.missing_eof_marker |= s.missing_eof_marker;
  if (s.missing_eof_marker) truncated_.push_back({inputs_.names_[current_], s.records});
  bytes_done_ += inputs_.sources_[current_].version.size;
  inputs_.progress_.bytes_read_.store(bytes_done_, std::memory_order_relaxed);
  reader_.reset();                    // Before its input.
  inputs_.inputs_[current_].reset();  // Frees its decode threads and buffers.
  ++current_;
}

absl::StatusOr<size_t> InputSetReader::ReadBatch(size_t max_bytes, record::KeyedRecordSink& sink) {
  size_t added = 0;
  size_t bytes = 0;
  while (bytes < max_bytes && current_ < inputs_.inputs_.size()) {
    if (reader_ == nullptr) RETURN_IF_ERROR(StartNext());
    ASSIGN_OR_RETURN(const size_t n,
                     reader_->ReadBatch(std::min(max_bytes - bytes, kProgressStep), sink));
    if (n == 0) {
      FinishCurrent();
      continue;
    }
    added += n;
    bytes += reader_->last_batch_bytes();
    inputs_.progress_.bytes_read_.store(bytes_done_ + inputs_.inputs_[current_]->bytes_consumed(),
                                        std::memory_order_relaxed);
  }
  return added;
}

LoadStats InputSetReader::stats() const {
  LoadStats s = done_;
  if (reader_ != nullptr) {
    s.records += reader_->stats().records;
    s.placed_records += reader_->stats().placed_records;
    s.record_bytes += reader_->stats().record_bytes;
  }
  return s;
}

}  // namespace rocksort::loader
