// The zero-copy BAM sink: stored records are BAM records, so writing one is
// a copy into the current BGZF block (bgzf_writer_internal.h), and the
// index, when asked for, is built from the offsets the writer reports.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/coding.h"
#include "common/hts_handles.h"
#include "common/status_macros.h"
#include "htslib/hts.h"
#include "output/bgzf_writer_internal.h"
#include "output/output.h"
#include "record/record.h"

namespace rocksort::output {
namespace {

// What the index needs of a stored record: tid, pos and htslib's bam_endpos.
IndexEntry IndexEntryOf(absl::string_view bytes) {
  const record::RecordView view(bytes);
  IndexEntry e;
  e.tid = view.tid();
  e.beg = view.pos();
  e.mapped = (view.flag() & BAM_FUNMAP) == 0;
  e.end = view.end();
  return e;
}

class BamSink : public RecordSink {
 public:
  BamSink(const sam_hdr_t& header, std::string index_path, std::string index_name)
      : header_(header),
        index_path_(std::move(index_path)),
        index_name_(std::move(index_name)),
        bai_(!index_path_.empty() && absl::EndsWith(index_name_, ".bai")) {}

  absl::Status Open(int fd, const std::string& name, const BamSinkOptions& options) {
    ASSIGN_OR_RETURN(const std::string header_bytes, EncodeBamHeader(header_));
    BgzfWriter::Options writer_options;
    writer_options.level = options.level;
    writer_options.threads = options.threads;
    writer_options.queue_blocks = QueueBlocks(options.queue_bytes);
    if (indexing()) {
      // Called on the writer thread, after `index_` was set below.
      writer_options.on_record = [this](const IndexEntry& e, uint64_t end_offset) {
        return PushToIndex(e, end_offset);
      };
    }
    ASSIGN_OR_RETURN(writer_, BgzfWriter::Create(fd, name, writer_options));
    RETURN_IF_ERROR(writer_->Write(header_bytes));
    RETURN_IF_ERROR(writer_->FlushBlock());  // Records start a fresh block, as in htslib.
    if (indexing()) {
      ASSIGN_OR_RETURN(const uint64_t header_end, writer_->WaitForWrites());
      RETURN_IF_ERROR(InitIndex(header_end));
    }
    return absl::OkStatus();
  }

  absl::Status Write(absl::string_view record) override {
    if (!indexing()) return writer_->WriteRecord(record);
    const IndexEntry entry = IndexEntryOf(record);
    return writer_->WriteRecord(record, &entry);
  }

  absl::Status Finish() override {
    RETURN_IF_ERROR(writer_->Close());
    if (!indexing()) return absl::OkStatus();
    // The end of the data: where the EOF block starts, as htslib's
    // bgzf_tell after the last record.
    const uint64_t data_end = writer_->bytes_written() - BgzfEofBlock().size();
    if (hts_idx_finish(index_.get(), data_end << 16) != 0 ||
        hts_idx_save_as(index_.get(), nullptr, index_path_.c_str(),
                        bai_ ? HTS_FMT_BAI : HTS_FMT_CSI) != 0) {
      return absl::UnavailableError(
          absl::StrFormat("%s: can't write the index: %s", index_name_,
                          errno != 0 ? std::strerror(errno) : "htslib error"));
    }
    return absl::OkStatus();
  }

  uint64_t bytes_written() const override { return writer_->bytes_written(); }
  std::optional<Waits> waits() const override {
    const BgzfWriter::Waits w = writer_->waits();
    return Waits{w.workers_idle_seconds, w.caller_blocked_seconds};
  }

 private:
  bool indexing() const { return !index_path_.empty(); }

  // As htslib's sam_idx_init: BAI is min_shift 14 with 5 levels; CSI gets
  // the levels the longest reference needs.
  absl::Status InitIndex(uint64_t header_end) {
    sam_hdr_t* h = const_cast<sam_hdr_t*>(&header_);  // htslib lacks const here.
    const int n_ref = sam_hdr_nref(h);
    int min_shift = 14, n_lvls = 5;
    if (!bai_) {
      int64_t max_len = 0;
      for (int i = 0; i < n_ref; ++i) max_len = std::max<int64_t>(max_len, sam_hdr_tid2len(h, i));
      max_len += 256;
      n_lvls = 0;
      for (int64_t span = int64_t{1} << min_shift; max_len > span; span <<= 3) ++n_lvls;
    }
    index_.reset(
        hts_idx_init(n_ref, bai_ ? HTS_FMT_BAI : HTS_FMT_CSI, header_end << 16, min_shift, n_lvls));
    if (index_ == nullptr) return absl::ResourceExhaustedError("can't create the index");
    return absl::OkStatus();
  }

  absl::Status PushToIndex(const IndexEntry& e, uint64_t end_offset) {
    if (hts_idx_push(index_.get(), e.tid, e.beg, e.end, end_offset, e.mapped ? 1 : 0) >= 0) {
      return absl::OkStatus();
    }
    // In coordinate order a push fails for a span beyond what the format
    // holds (BAI: 2^29 - 1), or for a record placed on a reference without
    // a position (POS 0, from BAM), which samtools cannot index either.
    const char* name =
        e.tid >= 0 ? sam_hdr_tid2name(const_cast<sam_hdr_t*>(&header_), e.tid) : nullptr;
    const char* ref = name != nullptr ? name : "*";
    const std::string where = e.beg < 0 ? absl::StrCat(ref, " with no position (POS 0)")
                                        : absl::StrFormat("%s:%d-%d", ref, e.beg + 1, e.end);
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: can't index the record at %s: %s", index_name_, where,
        e.beg < 0 ? "a record on a reference needs a position to be indexed"
        : bai_    ? "BAI cannot hold positions beyond 2^29 - 1; write a CSI index instead"
                  : "a position beyond what the index holds"));
  }

  const sam_hdr_t& header_;
  const std::string index_path_;
  const std::string index_name_;
  const bool bai_;
  // Set before the first record and used on the writer thread after it.
  IndexPtr index_;
  // Declared last: destroyed (threads stopped) before the index.
  std::unique_ptr<BgzfWriter> writer_;
};

}  // namespace

absl::StatusOr<std::string> EncodeBamHeader(const sam_hdr_t& header) {
  sam_hdr_t* h = const_cast<sam_hdr_t*>(&header);  // htslib lacks const here.
  const char* text = sam_hdr_str(h);
  const size_t l_text = text != nullptr ? sam_hdr_length(h) : 0;
  if (l_text > INT32_MAX) return absl::InvalidArgumentError("header text too long for BAM");
  std::string out("BAM\1", 4);
  AppendLittleEndian32(static_cast<uint32_t>(l_text), &out);
  if (l_text > 0) out.append(text, l_text);
  const int n_ref = sam_hdr_nref(h);
  AppendLittleEndian32(static_cast<uint32_t>(n_ref), &out);
  for (int i = 0; i < n_ref; ++i) {
    const char* name = sam_hdr_tid2name(h, i);
    const hts_pos_t len = sam_hdr_tid2len(h, i);
    if (len > INT32_MAX) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "reference \"%s\" is %d bases long; BAM holds at most %d", name, len, INT32_MAX));
    }
    const size_t l_name = std::strlen(name) + 1;
    AppendLittleEndian32(static_cast<uint32_t>(l_name), &out);
    out.append(name, l_name);
    AppendLittleEndian32(static_cast<uint32_t>(len), &out);
  }
  return out;
}

size_t QueueBlocks(size_t queue_bytes) {
  return static_cast<size_t>(std::clamp<uint64_t>(queue_bytes / kBgzfMaxInput, 4, 256));
}

absl::StatusOr<std::unique_ptr<RecordSink>> OpenBamSink(const sam_hdr_t& header, int fd,
                                                        const std::string& name,
                                                        const BamSinkOptions& options) {
  auto sink = std::make_unique<BamSink>(header, options.index_path, options.index_name);
  RETURN_IF_ERROR(sink->Open(fd, name, options));
  return sink;
}

}  // namespace rocksort::output
