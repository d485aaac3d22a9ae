#include "loader/loader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <tuple>
#include <utility>

#include "htslib/bgzf.h"
#include "htslib/cram.h"
#include "htslib/hfile.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/errors.h"
#include "common/hts_handles.h"
#include "common/record_checksum.h"
#include "common/status_macros.h"
#include "common/thread_usage.h"
#include "loader/header_merge_internal.h"
#include "loader/readahead_internal.h"
#include "record/record.h"

namespace rocksort::loader {
namespace {

absl::Status RecordError(const Input& input, uint64_t record_number, const bam1_t* b,
                         absl::string_view what) {
  if (b != nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: record %d (read \"%s\"): %s", input.name(), record_number, bam_get_qname(b), what));
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: record %d: %s", input.name(), record_number, what));
}

// sam_read1's error codes (htslib 1.16, sam.h): -2 truncated data or a
// corrupt BGZF block (or a SAM line that does not parse), -3 a reference
// index outside the header, -4 an invalid record (bad lengths, CIGAR
// inconsistent with the sequence).
std::string DescribeReadError(int code, htsFile* file) {
  const htsExactFormat format = hts_get_format(file)->format;
  const bool text = format == sam;
  switch (code) {
    case -2:
      if (format == cram) {
        return "can't decode the CRAM data (a missing or wrong reference, or corrupt data)";
      }
      return text ? "malformed SAM line" : "truncated file or corrupt compressed block";
    case -3:
      return text ? "reference name not in the header"
                  : "truncated record or reference index outside the header";
    case -4:
      return "invalid record (inconsistent lengths or CIGAR)";
    default:
      return "unreadable record";
  }
}

// True when the BGZF layer under `file` recorded an error (htslib's threaded
// reader reports a corrupt or truncated block as end of stream and only sets
// errcode).
bool BgzfFailed(htsFile* file) {
  return file->is_bgzf && file->fp.bgzf != nullptr && file->fp.bgzf->errcode != 0;
}

// Tells htslib to use `reference` for `file` (CRAM decoding, or the @SQ
// lines of SAM text without them). SAM text takes the references of a
// header without @SQ lines from a FASTA index (name and length per line),
// not from the FASTA: use the FASTA's index when it has one, as CRAM would.
absl::Status UseReference(htsFile* file, const std::string& name, const std::string& reference) {
  if (::access(reference.c_str(), R_OK) != 0) {
    return ErrnoStatus(errno, absl::StrFormat("can't open the reference \"%s\"", reference));
  }
  std::string aux = reference;
  if (hts_get_format(file)->format == sam && !absl::EndsWith(reference, ".fai") &&
      ::access((reference + ".fai").c_str(), R_OK) == 0) {
    aux = reference + ".fai";
  }
  if (hts_set_fai_filename(file, aux.c_str()) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: can't use the reference \"%s\" (not FASTA, or no index can be made)",
                        name, reference));
  }
  return absl::OkStatus();
}

struct HtsOptFree {
  void operator()(hts_opt* opts) const { hts_opt_free(opts); }
};
using HtsOptPtr = std::unique_ptr<hts_opt, HtsOptFree>;

// One format option as htslib's hts_opt_add parses it; InvalidArgument
// naming it when htslib does not know it (or, for cache_size, its suffix).
absl::StatusOr<HtsOptPtr> ParseFormatOption(const std::string& option) {
  hts_opt* parsed = nullptr;
  if (hts_opt_add(&parsed, option.c_str()) != 0) {
    hts_opt_free(parsed);
    return absl::InvalidArgumentError(absl::StrFormat(
        "--input-fmt-option %s: unknown input format option \"%s\" (htslib's names, e.g. "
        "required_fields=0x1ff, decode_md=0, filter=EXPR, reference=FILE)",
        option, option.substr(0, option.find('='))));
  }
  return HtsOptPtr(parsed);
}

// Applies the reference and the format options of `options` to `file`
// before its header is read, as samtools' sam_open_format applies them:
// each option on its own, in order (as hts_opt_apply would apply the list),
// so that a failure names it.
absl::Status ApplyInputOptions(htsFile* file, const std::string& name,
                               const InputOptions& options) {
  if (!options.reference.empty()) RETURN_IF_ERROR(UseReference(file, name, options.reference));
  for (const std::string& option : options.format_options) {
    RETURN_IF_ERROR(CheckInputFormatOption(option));
    ASSIGN_OR_RETURN(const HtsOptPtr parsed, ParseFormatOption(option));
    if (hts_opt_apply(file, parsed.get()) != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: htslib can't apply --input-fmt-option %s (a value out of range, or a file it "
          "can't use)",
          name, option));
    }
  }
  return absl::OkStatus();
}

// Re-reads `path` in the calling thread, starting at the record that begins
// at BGZF virtual offset `resume` (the first record the threaded reader did
// not deliver; record number `resume_record`), and returns the 1-based number
// of the first record that fails and sam_read1's code for it (-2 when only
// the BGZF layer failed), or {0, 0} if it reads cleanly. `resume` < 0 means
// from the start (CRAM, which has no BGZF offsets). `options` are the
// input's own.
std::pair<uint64_t, int> LocateReadError(const std::string& path, const InputOptions& options,
                                         int64_t resume, uint64_t resume_record) {
  htsFile* file = hts_open(path.c_str(), "r");
  if (file == nullptr) return {0, 0};
  // Opened as Input::OpenHeader opens it (reference, format options such as
  // filter=), or the re-read fails elsewhere or counts other records.
  sam_hdr_t* header = ApplyInputOptions(file, path, options).ok() ? sam_hdr_read(file) : nullptr;
  std::pair<uint64_t, int> result{0, 0};
  if (header != nullptr) {
    uint64_t n = 0;
    if (resume >= 0 && file->is_bgzf && bgzf_seek(file->fp.bgzf, resume, SEEK_SET) == 0) {
      n = resume_record - 1;
    }
    bam1_t* b = bam_init1();
    int r;
    while ((r = sam_read1(file, header, b)) >= 0) ++n;
    if (r < -1) {
      result = {n + 1, r};
    } else if (BgzfFailed(file)) {
      result = {n + 1, -2};
    }
    bam_destroy1(b);
    sam_hdr_destroy(header);
  }
  hts_close(file);
  return result;
}

// htslib parses a filter= expression only when it first evaluates it, and
// then fails the read as if the data were corrupt (samtools says
// "truncated file"): evaluated here once, on a minimal unmapped record, so
// that an expression that does not parse is named before any work is done.
absl::Status CheckFilter(htsFile* file, const sam_hdr_t& header, const std::string& name,
                         const std::vector<std::string>& format_options) {
  if (file->filter == nullptr) return absl::OkStatus();
  RecordPtr probe(bam_init1());
  if (probe == nullptr || bam_set1(probe.get(), 1, "x", BAM_FUNMAP, -1, -1, 0, 0, nullptr, -1, -1,
                                   0, 0, nullptr, nullptr, 0) < 0) {
    return absl::ResourceExhaustedError("out of memory");
  }
  if (sam_passes_filter(&header, probe.get(), file->filter) >= 0) return absl::OkStatus();
  std::string option = "filter=...";  // The last filter= given is the one htslib kept.
  for (const std::string& o : format_options) {
    if (absl::AsciiStrToLower(o.substr(0, o.find('='))) == "filter") option = o;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: --input-fmt-option %s: htslib can't parse the filter expression", name, option));
}

}  // namespace

absl::Status CheckInputFormatOption(const std::string& option) {
  const std::string name = absl::AsciiStrToLower(option.substr(0, option.find('=')));
  if (name == "nthreads") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--input-fmt-option %s: rocksort does not take nthreads: threads are set with -@", option));
  }
  if (name == "verbosity") {
    return absl::InvalidArgumentError(
        absl::StrFormat("--input-fmt-option %s: rocksort does not take verbosity: htslib's "
                        "logging is set with --verbosity",
                        option));
  }
  ASSIGN_OR_RETURN(const HtsOptPtr parsed, ParseFormatOption(option));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Input>> Input::Open(const std::string& path,
                                                   const InputOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<Input> input, OpenHeader(path, options));
  RETURN_IF_ERROR(input->Start());
  return input;
}

absl::StatusOr<std::unique_ptr<Input>> Input::OpenHeader(const std::string& path,
                                                         const InputOptions& options) {
  const bool is_stdin = path == "-";
  const std::string name = is_stdin ? "stdin" : path;
  struct stat input_stat;
  if (!is_stdin) {
    if (::stat(path.c_str(), &input_stat) != 0) {
      return ErrnoStatus(errno, absl::StrFormat("can't open \"%s\"", path));
    }
    if (S_ISDIR(input_stat.st_mode)) {
      return absl::InvalidArgumentError(absl::StrFormat("can't open \"%s\": is a directory", path));
    }
  }
  // A regular file is opened here so that SequentialReadahead can read it
  // ahead in large requests; anything else (stdin, a FIFO, a device) goes
  // through htslib's own hts_open.
  const bool regular_file = !is_stdin && S_ISREG(input_stat.st_mode);
  int fd = -1;
  errno = 0;
  HtsFilePtr file;
  if (regular_file) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, absl::StrFormat("can't open \"%s\"", path));
    hFILE* hfile = hdopen(fd, "r");  // Owns fd from here on.
    if (hfile == nullptr) {
      const int err = errno;
      ::close(fd);
      return ErrnoStatus(err, absl::StrFormat("can't open \"%s\"", path));
    }
    errno = 0;
    file.reset(hts_hopen(hfile, path.c_str(), "r"));
    if (file == nullptr) {
      const int err = errno;
      hclose_abruptly(hfile);
      errno = err;
    }
  } else {
    file.reset(hts_open(path.c_str(), "r"));
  }
  if (file == nullptr) {
    const int err = errno;
    // htslib reports an unrecognised format as ENOEXEC ("Exec format error").
    return absl::InvalidArgumentError(absl::StrFormat(
        "can't open \"%s\": %s", name,
        err != 0 && err != ENOEXEC ? std::strerror(err) : "not a SAM, BAM or CRAM file"));
  }
  const htsFormatCategory category = hts_get_format(file.get())->category;
  const htsExactFormat format = hts_get_format(file.get())->format;
  if (category != sequence_data) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: not an alignment file (SAM, BAM or CRAM)", name));
  }
  if (format != sam && format != bam && format != cram) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s, not an alignment file (SAM, BAM or CRAM)", name,
                        format == fastq_format   ? "FASTQ"
                        : format == fasta_format ? "FASTA"
                                                 : "unknown format"));
  }
  RETURN_IF_ERROR(ApplyInputOptions(file.get(), name, options));
  HeaderPtr header(sam_hdr_read(file.get()));
  if (header == nullptr) {
    return absl::DataLossError(
        absl::StrFormat("%s: can't read the header (truncated or corrupt)", name));
  }
  RETURN_IF_ERROR(CheckFilter(file.get(), *header, name, options.format_options));
  std::unique_ptr<Input> input(new Input(path, name, file.release(), header.release()));
  if (regular_file) {
    // The descriptor's, not the path's: what was read, even if the path was
    // renamed over since the stat above.
    struct stat opened;
    if (::fstat(fd, &opened) != 0) {
      return ErrnoStatus(errno, absl::StrFormat("can't stat \"%s\"", path));
    }
    input->fd_ = fd;
    input->version_ = VersionOf(opened);
  }
  input->options_ = options;
  return input;
}

absl::Status Input::Start() {
  if (started_) return absl::OkStatus();
  started_ = true;
  // htslib's decode threads, and the readahead's, inherit the name.
  const std::string thread_name = ThreadName();
  SetThreadName("rs-decode");
  const absl::Status started = StartThreads();
  SetThreadName(thread_name.c_str());
  return started;
}

absl::Status Input::StartThreads() {
  // Threads start after the header: a corrupt block further on must not make
  // the header unreadable (htslib's threaded reader fails as a whole).
  // Only regular files: after an error the loader re-reads the file to name
  // the exact record, which a pipe cannot do.
  // BGZF only: plain gzip (SAM.gz from gzip) has no EOF block, and htslib
  // decompresses it in one thread whatever bgzf_mt is asked.
  const htsExactFormat format = hts_get_format(file_)->format;
  const bool bgzf_blocks =
      file_->is_bgzf && file_->fp.bgzf->is_compressed && !file_->fp.bgzf->is_gzip;
  const int threads = options_.threads;
  if (threads > 1 && fd_ >= 0) {
    int r = 0;
    if (format == cram) {
      r = hts_set_threads(file_, threads);
      threaded_ = true;
    } else if (bgzf_blocks) {
      // A pool of our own for its queue depth: bgzf_mt queues two decoded
      // blocks per thread, and on two cores the flushes preempt the decode
      // threads often enough that the loader waited for blocks while a
      // core idled. kDecodeQueueBlocks (64 KiB each) ride that out.
      decode_pool_ = hts_tpool_init(threads);
      r = decode_pool_ == nullptr
              ? -1
              : bgzf_thread_pool(file_->fp.bgzf, decode_pool_, kDecodeQueueBlocks);
      threaded_ = true;
    }
    if (r != 0) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("%s: can't start %d decode threads", name_, threads));
    }
  }
  if (fd_ >= 0) {
    const uint64_t chunk = std::max<uint64_t>(options_.readahead_chunk, 4096);
    const uint64_t window = std::max<uint64_t>(chunk, uint64_t{16} << 20);
    readahead_ = std::make_unique<SequentialReadahead>(fd_, size(), window, chunk);
  }
  return absl::OkStatus();
}

Input::FileVersion Input::VersionOf(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<uint64_t>(st.st_size),
          int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
}

Input::Input(std::string path, std::string name, htsFile* file, sam_hdr_t* header)
    : path_(std::move(path)), name_(std::move(name)), file_(file), header_(header) {}

uint64_t Input::bytes_consumed() const {
  int64_t offset = 0;
  if (file_->is_bgzf) {
    // The compressed address of the block being read: bgzf_tell without
    // the offset within the block.
    offset = bgzf_tell(file_->fp.bgzf) >> 16;
  } else if (file_->format.format == cram) {
    hFILE* const hf = cram_fd_get_fp(file_->fp.cram);
    offset = hf != nullptr ? htell(hf) : 0;
  } else {
    offset = htell(file_->fp.hfile);
  }
  return offset > 0 ? static_cast<uint64_t>(offset) : 0;
}

Input::~Input() {
  readahead_.reset();  // Before the descriptor it watches is closed.
  sam_hdr_destroy(header_);
  hts_close(file_);
  if (decode_pool_ != nullptr) hts_tpool_destroy(decode_pool_);  // After the file using it.
}

uint64_t EstimateUncompressedSize(const std::string& path, uint64_t sample_bytes) {
  if (path == "-") return 0;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) return 0;
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  BGZF* fp = bgzf_open(path.c_str(), "r");
  if (fp == nullptr) return 0;
  char magic[4] = {};
  if (!fp->is_compressed && bgzf_peek(fp) == 'C') {
    // CRAM compresses far more than BGZF and its ratio is not visible from
    // the container bytes: report "unknown" so the policy adapts instead.
    if (bgzf_read(fp, magic, 4) == 4 && std::memcmp(magic, "CRAM", 4) == 0) {
      bgzf_close(fp);
      return 0;
    }
  }
  uint64_t estimate = file_size;  // Uncompressed (SAM text): 1:1.
  if (fp->is_compressed) {
    std::unique_ptr<char[]> buf(new char[1 << 16]);
    uint64_t read = 0;
    ssize_t n = 0;
    while (read < sample_bytes && (n = bgzf_read(fp, buf.get(), 1 << 16)) > 0) read += n;
    // The compressed bytes consumed: the start of the current block plus the
    // whole current block (its data has been decompressed).
    const uint64_t consumed = static_cast<uint64_t>(bgzf_tell(fp) >> 16) + fp->block_clength;
    if (n >= 0 && read > 0 && consumed > 0) {
      estimate = static_cast<uint64_t>(static_cast<double>(file_size) *
                                       (static_cast<double>(read) / static_cast<double>(consumed)));
    }
  }
  bgzf_close(fp);
  return estimate;
}

uint64_t EstimateSampleBytes(size_t inputs) {
  constexpr uint64_t kShared = uint64_t{8} << 20;
  constexpr uint64_t kMinEach = uint64_t{1} << 20;
  return std::max(kMinEach, kShared / std::max<size_t>(inputs, 1));
}

uint64_t EstimateUncompressedSize(const std::vector<std::string>& paths) {
  const uint64_t sample = EstimateSampleBytes(paths.size());
  uint64_t total = 0;
  for (const std::string& path : paths) {
    const uint64_t estimate = EstimateUncompressedSize(path, sample);
    if (estimate == 0) return 0;
    total += estimate;
  }
  return total;
}

RecordReader::RecordReader(Input& input, const keycodec::KeyEncoder& keys, uint64_t first_seq,
                           const IdTranslation* ids)
    : input_(input),
      keys_(keys),
      first_seq_(first_seq),
      ids_(ids),
      record_(bam_init1(), bam_destroy1) {
  htsFile* const file = input_.file();
  if (file->is_bgzf && file->fp.bgzf != nullptr) next_offset_ = bgzf_tell(file->fp.bgzf);
}

absl::Status RecordReader::ReadError(int code) {
  uint64_t record_number = stats_.records + 1;
  if (input_.threaded()) {
    // Threads decode ahead and drop what they queued: re-read (only a
    // regular file; Open does not thread other inputs) from the first
    // record not delivered to find the one that fails.
    const std::pair<uint64_t, int> located =
        LocateReadError(input_.path(), input_.options(), next_offset_, record_number);
    if (located.first != 0) std::tie(record_number, code) = located;
  }
  // htslib's own reason (which field, which reference) is logged with -v
  // only: a failure is one line.
  return absl::DataLossError(
      absl::StrFormat("%s: record %d: %s (htslib error %d; -v shows htslib's reason)",
                      input_.name(), record_number, DescribeReadError(code, input_.file()), code));
}

absl::StatusOr<size_t> RecordReader::ReadBatch(size_t max_bytes, record::KeyedRecordSink& sink) {
  if (record_ == nullptr) return absl::ResourceExhaustedError("out of memory");
  htsFile* const file = input_.file();
  size_t added = 0;
  size_t bytes = 0;
  last_batch_bytes_ = 0;
  while (!ended_ && bytes < max_bytes) {
    const int r = sam_read1(file, input_.mutable_header(), record_.get());
    if (r == -1) {  // End of stream, unless the BGZF layer says otherwise.
      if (BgzfFailed(file)) return ReadError(-2);
      ended_ = true;
      stats_.checksum = checksum_.value();
      // htslib notes a missing BGZF EOF block or CRAM EOF container when it
      // reaches the end, from a file (threaded or not) or a pipe alike.
      stats_.missing_eof_marker =
          (next_offset_ >= 0 && file->fp.bgzf->no_eof_block) ||
          (hts_get_format(file)->format == cram && cram_eof(file->fp.cram) == 2);
      break;
    }
    if (r < -1) return ReadError(r);
    const uint64_t record_number = stats_.records + 1;
    if (ids_ != nullptr) {
      if (absl::Status s = RewriteIds(*ids_, record_.get()); !s.ok()) {
        return RecordError(input_, record_number, nullptr, s.message());
      }
    }
    key_.clear();
    // Keyed before it is encoded: an order may change the record (-M).
    if (absl::Status s = keys_.AppendAndRewrite(record_.get(), first_seq_ + stats_.records, &key_);
        !s.ok()) {
      return RecordError(input_, record_number, record_.get(), s.message());
    }
    if (absl::Status s = record::EncodeRecord(*record_, &encoded_); !s.ok()) {
      return RecordError(input_, record_number, nullptr, s.message());
    }
    for (int i = 0; i < encoded_.num_parts; ++i) {
      checksum_.AddPiece(encoded_.parts[i].data(), encoded_.parts[i].size());
    }
    checksum_.EndRecord();
    RETURN_IF_ERROR(sink.Add(key_, encoded_));
    ++stats_.records;
    if (record_->core.tid >= 0) ++stats_.placed_records;
    ++added;
    stats_.record_bytes += encoded_.total_size;
    bytes += encoded_.total_size + key_.size();
    if (next_offset_ >= 0) next_offset_ = bgzf_tell(file->fp.bgzf);
  }
  last_batch_bytes_ = bytes;
  return added;
}

uint64_t InputReadaheadChunk(uint64_t request_bytes, uint64_t max_read_bytes) {
  uint64_t chunk = uint64_t{2} << 20;
  if (max_read_bytes != 0) chunk = std::min(chunk, max_read_bytes);
  // Whole requests, at least one.
  if (request_bytes != 0 && chunk > request_bytes) chunk -= chunk % request_bytes;
  return chunk;
}

}  // namespace rocksort::loader
