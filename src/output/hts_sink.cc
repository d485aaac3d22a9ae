// The htslib sink: SAM (plain or BGZF), CRAM, FASTQ and FASTA written by
// htslib's own writers, the way samtools sort writes them (bam_sort.c,
// bam_merge_simple): open with the mode samtools builds, apply the format
// options, a thread pool of -@ threads, write the header, start the index
// (sam_idx_init), then sam_write1 each record and finish with sam_idx_save
// and hts_close. Each stored record is decoded into one reused bam1_t
// (record::DecodeRecord, which restores CIGARs moved to CG tags), so htslib
// sees what bam_read1 would have returned for the same BAM record.
//
// Also OpenSink and CheckSink, which choose between this sink and the BAM
// sink.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/errors.h"
#include "common/hts_handles.h"
#include "common/status_macros.h"
#include "common/thread_usage.h"
#include "htslib/faidx.h"
#include "htslib/hfile.h"
#include "htslib/hts.h"
#include "htslib/thread_pool.h"
#include "output/output.h"
#include "record/record.h"

namespace rocksort::output {
namespace {

// hFILE buffer size for the output, as samtools sort sets it
// (HTS_OPT_BLOCK_SIZE, BAM_BLOCK_SIZE in bam_sort.c).
constexpr int kBlockSize = 2 * 1024 * 1024;

// errno values that mean the bytes could not be written, whatever htslib
// was doing: reported as such, not as a format or reference problem.
bool IsWriteError(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EIO:
    case EPIPE:
    case EFBIG:
    case EROFS:
    case EBADF:
    case ENXIO:
      return true;
    default:
      return false;
  }
}

class HtsSink : public RecordSink {
 public:
  // `header` must outlive the sink. `index_path` empty: no index.
  HtsSink(const OutputFormat& format, const sam_hdr_t& header, std::string name,
          std::string index_path, std::string index_name)
      : format_(format),
        header_(header),
        name_(std::move(name)),
        index_path_(std::move(index_path)),
        index_name_(std::move(index_name)) {}

  // Opens a writer on a duplicate of `fd` (htslib closes what it is given;
  // `fd` stays the caller's), applies the options, starts `threads` threads
  // when more than one, writes the header and starts the index.
  absl::Status Open(int fd, int threads) {
    fd_ = fd;
    const int dup_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup_fd < 0) return ErrnoStatus(errno, absl::StrFormat("%s: can't write", name_));
    start_offset_ = ::lseek(dup_fd, 0, SEEK_CUR);
    errno = 0;
    hFILE* hf = hdopen(dup_fd, "w");
    if (hf == nullptr) {
      const int err = errno;
      ::close(dup_fd);
      return ErrnoStatus(err != 0 ? err : ENOMEM, absl::StrFormat("%s: can't write", name_));
    }
    const std::string mode = format_.HtsMode();
    errno = 0;
    file_.reset(hts_hopen(hf, name_.c_str(), mode.c_str()));
    if (file_ == nullptr) {
      const int err = errno;
      hclose_abruptly(hf);
      return absl::InternalError(
          absl::StrFormat("%s: htslib can't write %s (mode \"%s\")%s", name_, format_.Describe(),
                          mode, err != 0 ? absl::StrCat(": ", std::strerror(err)) : ""));
    }
    hfile_ = hf;  // Owned by file_ from here on.
    // Each option on its own, in order (as hts_opt_apply would apply the
    // list), so that a failure names the option.
    for (const std::string& option : format_.options) RETURN_IF_ERROR(ApplyOption(option));
    // Only a buffer size. Not for BGZF text: htslib 1.16 (hts_hfile) takes
    // its BGZF handle for an hFILE there.
    if (!format_.bgzf) (void)hts_set_opt(file_.get(), HTS_OPT_BLOCK_SIZE, kBlockSize);
    if (threads > 1) {
      // htslib's workers inherit the name given around their creation
      // (common/thread_usage.h).
      const std::string thread_name = ThreadName();
      SetThreadName("rs-encode");
      pool_.reset(hts_tpool_init(threads));
      SetThreadName(thread_name.c_str());
      if (pool_ == nullptr) {
        return absl::ResourceExhaustedError(
            absl::StrFormat("%s: can't start %d threads", name_, threads));
      }
      pool_handle_ = {pool_.get(), 0};  // qsize 0: htslib's default, as samtools.
      if (hts_set_opt(file_.get(), HTS_OPT_THREAD_POOL, &pool_handle_) != 0) {
        return absl::InternalError(absl::StrFormat("%s: htslib can't use %d threads for %s", name_,
                                                   threads, format_.Describe()));
      }
    }
    errno = 0;
    if (sam_hdr_write(file_.get(), &header_) != 0) return Failure("can't write the header");
    if (!index_path_.empty()) {
      // As samtools' auto_index: min_shift 0 asks for BAI (BGZF SAM only;
      // CRAM always writes .crai).
      const int min_shift = absl::EndsWith(index_name_, ".bai") ? 0 : 14;
      errno = 0;
      if (sam_idx_init(file_.get(), const_cast<sam_hdr_t*>(&header_), min_shift,
                       index_path_.c_str()) < 0) {
        return ErrnoStatus(errno != 0 ? errno : EINVAL,
                           absl::StrFormat("%s: can't start the index", index_name_));
      }
    }
    record_.reset(bam_init1());
    if (record_ == nullptr) return absl::ResourceExhaustedError("out of memory");
    return absl::OkStatus();
  }

  absl::Status Write(absl::string_view record) override {
    ++records_;
    RETURN_IF_ERROR(record::DecodeRecord(record, record_.get()));
    errno = 0;
    if (sam_write1(file_.get(), &header_, record_.get()) < 0) {
      return Failure(absl::StrFormat("can't write record %d (read \"%s\")", records_,
                                     bam_get_qname(record_.get())));
    }
    return absl::OkStatus();
  }

  absl::Status Finish() override {
    if (!index_path_.empty()) {
      // BGZF SAM: flushes and writes the index; CRAM: hts_close does.
      errno = 0;
      if (sam_idx_save(file_.get()) < 0) {
        return ErrnoStatus(errno != 0 ? errno : EIO,
                           absl::StrFormat("%s: can't write the index", index_name_));
      }
    }
    const off_t buffered_end = htell(hfile_);
    errno = 0;
    const int closed = hts_close(file_.release());
    hfile_ = nullptr;
    pool_.reset();  // After the file: its jobs ran on the pool.
    if (closed != 0) return Failure("can't finish the output");
    const off_t end = ::lseek(fd_, 0, SEEK_CUR);
    // A pipe has no offset: count what htslib had passed on before closing
    // (all but what the close itself flushed).
    bytes_written_ = start_offset_ >= 0 && end >= start_offset_
                         ? static_cast<uint64_t>(end - start_offset_)
                         : static_cast<uint64_t>(buffered_end);
    return absl::OkStatus();
  }

  uint64_t bytes_written() const override {
    return hfile_ != nullptr ? static_cast<uint64_t>(htell(hfile_)) : bytes_written_;
  }

 private:
  absl::Status ApplyOption(const std::string& option) {
    hts_opt* parsed = nullptr;
    if (hts_opt_add(&parsed, option.c_str()) != 0) {
      hts_opt_free(parsed);
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: htslib does not take the output format option \"%s\"", name_, option));
    }
    const bool reference = parsed->opt == CRAM_OPT_REFERENCE;
    // htslib 1.16 leaks its reference table when a CRAM reference fails to
    // load (cram_load_reference drops it), so the FASTA and its index are
    // loaded here first, as htslib's refs_load_fai names them.
    bool loadable = true;
    if (reference && format_.kind == OutputKind::kCram) loadable = ReferenceLoads(option);
    errno = 0;
    const int applied = loadable ? hts_opt_apply(file_.get(), parsed) : -1;
    const int err = errno;
    hts_opt_free(parsed);
    if (applied == 0) return absl::OkStatus();
    if (reference) {
      // htslib's errno is that of whatever it tried last (often a probe for
      // the index): the file itself is checked for the message.
      const std::string reference = option.substr(option.find('=') + 1);
      const std::string file = reference.substr(0, reference.find(HTS_IDX_DELIM));
      const bool readable = ::access(file.c_str(), R_OK) == 0;
      const int access_err = errno;
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: can't use the reference \"%s\" for CRAM output: %s", name_, reference,
          readable ? "not a FASTA file, or its index (.fai) can't be read or made"
                   : std::strerror(access_err != 0 ? access_err : err)));
    }
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: htslib refused the output format option \"%s\" for %s output", name_,
                        option, format_.Describe()));
  }

  // Whether the reference of `option` (reference=FILE) loads as htslib's
  // refs_load_fai loads it: FASTA##idx##FAI, FASTA.fai standing for the
  // FASTA, or the FASTA with its index (made if missing) beside it.
  static bool ReferenceLoads(const std::string& option) {
    const std::string reference = option.substr(option.find('=') + 1);
    std::string fasta = reference;
    std::string fai;
    if (const size_t at = reference.find(HTS_IDX_DELIM); at != std::string::npos) {
      fasta = reference.substr(0, at);
      fai = reference.substr(at + std::strlen(HTS_IDX_DELIM));
    } else if (absl::EndsWith(reference, ".fai") && reference.size() > 4) {
      fasta = reference.substr(0, reference.size() - 4);
      fai = reference;
    }
    faidx_t* index =
        fai_load3(fasta.c_str(), fai.empty() ? nullptr : fai.c_str(), nullptr, FAI_CREATE);
    if (index == nullptr) return false;
    fai_destroy(index);
    return true;
  }

  // A failed htslib call: a write error by its errno, otherwise for CRAM
  // most likely a reference sequence that could not be loaded.
  absl::Status Failure(absl::string_view what) const {
    const int err = errno;
    if (IsWriteError(err)) return ErrnoStatus(err, absl::StrFormat("%s: %s", name_, what));
    if (format_.kind == OutputKind::kCram) {
      const std::string reference = format_.reference();
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: %s: htslib could not encode the CRAM output, most likely because a reference "
          "sequence could not be loaded: %s (-v shows htslib's reason)",
          name_, what,
          reference.empty()
              ? "no reference was given (--reference FASTA); htslib looked for the @SQ "
                "lines' M5 and UR tags in REF_PATH and REF_CACHE"
              : absl::StrFormat("check that the reference \"%s\" holds every @SQ sequence",
                                reference)));
    }
    return absl::InternalError(absl::StrFormat(
        "%s: %s as %s (htslib error%s; -v shows htslib's reason)", name_, what, format_.Describe(),
        err != 0 ? absl::StrCat(": ", std::strerror(err)) : ""));
  }

  const OutputFormat format_;
  const sam_hdr_t& header_;
  const std::string name_;
  // htslib keeps a pointer to the index name until the index is saved.
  const std::string index_path_;
  const std::string index_name_;
  int fd_ = -1;              // The caller's; not closed here.
  off_t start_offset_ = -1;  // -1: not seekable (a pipe).
  uint64_t records_ = 0;
  uint64_t bytes_written_ = 0;  // Set by Finish.
  RecordPtr record_;
  // The pool outlives the file that uses it: declared first, destroyed last.
  ThreadPoolPtr pool_;
  htsThreadPool pool_handle_ = {nullptr, 0};  // What htslib was given: pool_.
  HtsFilePtr file_;         // Closed, without checking, when Finish was not reached.
  hFILE* hfile_ = nullptr;  // file_'s stream (not owned), for the byte count.
};

}  // namespace

absl::Status CheckSink(const OutputFormat& format, const sam_hdr_t& header, const std::string& name,
                       bool write_index) {
  if (write_index && !format.indexable()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--write-index: %s output can't be indexed (samtools fails after sorting); write "
        "BAM, CRAM or BGZF-compressed SAM (.sam.gz) to have an index",
        format.Describe()));
  }
  if (format.kind == OutputKind::kBam) return absl::OkStatus();  // Nothing htslib opens.
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null_fd < 0) return ErrnoStatus(errno, "can't open /dev/null");
  absl::Status status;
  {
    HtsSink dry_run(format, header, name, "", "");
    status = dry_run.Open(null_fd, 1);
    if (status.ok()) status = dry_run.Finish();
  }
  ::close(null_fd);
  return status;
}

absl::StatusOr<std::unique_ptr<RecordSink>> OpenSink(const OutputFormat& format,
                                                     const sam_hdr_t& header, int fd,
                                                     const std::string& name,
                                                     const SinkOptions& options) {
  if (format.kind == OutputKind::kBam) {
    BamSinkOptions bam;
    bam.level = format.EffectiveLevel();
    bam.threads = options.threads;
    bam.queue_bytes = options.queue_bytes;
    bam.index_path = options.index_path;
    bam.index_name = options.index_name;
    return OpenBamSink(header, fd, name, bam);
  }
  if (!options.index_path.empty() && !format.indexable()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s output can't be indexed", options.index_name, format.Describe()));
  }
  auto sink =
      std::make_unique<HtsSink>(format, header, name, options.index_path, options.index_name);
  RETURN_IF_ERROR(sink->Open(fd, options.threads));
  return sink;
}

}  // namespace rocksort::output
