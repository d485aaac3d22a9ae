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

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "common/record_checksum.h"
#include "common/status_macros.h"
#include "keycodec/keycodec.h"
#include "record/record.h"
#include "rocksdb/write_batch.h"

namespace rocksort::loader {
namespace {

struct BamDeleter {
  void operator()(bam1_t* b) const { bam_destroy1(b); }
};

absl::Status RecordError(const Input& input, uint64_t record_number,
                         const bam1_t* b, absl::string_view what) {
  if (b != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: record %d (read \"%s\"): %s", input.name(),
                        record_number, bam_get_qname(b), what));
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

// Re-reads `path` in the calling thread, starting at the record that begins
// at BGZF virtual offset `resume` (the first record the threaded reader did
// not deliver; record number `resume_record`), and returns the 1-based number
// of the first record that fails and sam_read1's code for it (-2 when only
// the BGZF layer failed), or {0, 0} if it reads cleanly. `resume` < 0 means
// from the start (CRAM, which has no BGZF offsets).
std::pair<uint64_t, int> LocateReadError(const std::string& path, int64_t resume,
                                         uint64_t resume_record) {
  htsFile* file = hts_open(path.c_str(), "r");
  if (file == nullptr) return {0, 0};
  sam_hdr_t* header = sam_hdr_read(file);
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

absl::Status FromRocks(const Input& input, const rocksdb::Status& s) {
  return absl::InternalError(
      absl::StrCat(input.name(), ": writing to the temporary database failed: ",
                   s.ToString()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Input>> Input::Open(const std::string& path, int threads,
                                                   uint64_t readahead_chunk,
                                                   const std::string& reference) {
  const bool is_stdin = path == "-";
  const std::string name = is_stdin ? "stdin" : path;
  struct stat input_stat;
  if (!is_stdin) {
    if (stat(path.c_str(), &input_stat) != 0) {
      const int err = errno;
      const std::string msg =
          absl::StrFormat("can't open \"%s\": %s", path, std::strerror(err));
      return err == ENOENT ? absl::NotFoundError(msg)
                           : absl::PermissionDeniedError(msg);
    }
    if (S_ISDIR(input_stat.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("can't open \"%s\": is a directory", path));
    }
  }
  // A regular file is opened here so that SequentialReadahead can read it
  // ahead in large requests; anything else (stdin, a FIFO, a device) goes
  // through htslib's own hts_open.
  const bool regular_file = !is_stdin && S_ISREG(input_stat.st_mode);
  int fd = -1;
  errno = 0;
  htsFile* file = nullptr;
  if (regular_file) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return absl::PermissionDeniedError(
          absl::StrFormat("can't open \"%s\": %s", path, std::strerror(errno)));
    }
    hFILE* hfile = hdopen(fd, "r");  // Owns fd from here on.
    if (hfile == nullptr) {
      const int err = errno;
      ::close(fd);
      return absl::ResourceExhaustedError(
          absl::StrFormat("can't open \"%s\": %s", path, std::strerror(err)));
    }
    errno = 0;
    file = hts_hopen(hfile, path.c_str(), "r");
    if (file == nullptr) {
      const int err = errno;
      hclose_abruptly(hfile);
      errno = err;
    }
  } else {
    file = hts_open(path.c_str(), "r");
  }
  if (file == nullptr) {
    const int err = errno;
    // htslib reports an unrecognised format as ENOEXEC ("Exec format error").
    return absl::InvalidArgumentError(absl::StrFormat(
        "can't open \"%s\": %s", name,
        err != 0 && err != ENOEXEC ? std::strerror(err) : "not a SAM, BAM or CRAM file"));
  }
  const htsFormatCategory category = hts_get_format(file)->category;
  if (category != sequence_data) {
    hts_close(file);
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: not an alignment file (SAM, BAM or CRAM)", name));
  }
  const htsExactFormat format = hts_get_format(file)->format;
  if (format != sam && format != bam && format != cram) {
    hts_close(file);
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %s, not an alignment file (SAM, BAM or CRAM)", name,
        format == fastq_format ? "FASTQ" : format == fasta_format ? "FASTA" : "unknown format"));
  }
  if (!reference.empty()) {
    if (::access(reference.c_str(), R_OK) != 0) {
      const int err = errno;
      hts_close(file);
      return absl::NotFoundError(absl::StrFormat("can't open the reference \"%s\": %s",
                                                 reference, std::strerror(err)));
    }
    // SAM text takes the references of a header without @SQ lines from a
    // FASTA index (name and length per line), not from the FASTA: use the
    // FASTA's index when it has one, as CRAM would.
    std::string aux = reference;
    if (format == sam && !absl::EndsWith(reference, ".fai") &&
        ::access((reference + ".fai").c_str(), R_OK) == 0) {
      aux = reference + ".fai";
    }
    if (hts_set_fai_filename(file, aux.c_str()) != 0) {
      hts_close(file);
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: can't use the reference \"%s\" (not FASTA, or no index can be made)", name,
          reference));
    }
  }
  sam_hdr_t* header = sam_hdr_read(file);
  if (header == nullptr) {
    hts_close(file);
    return absl::DataLossError(
        absl::StrFormat("%s: can't read the header (truncated or corrupt)", name));
  }
  // Threads start after the header: a corrupt block further on must not make
  // the header unreadable (htslib's threaded reader fails as a whole).
  // Only regular files: after an error the loader re-reads the file to name
  // the exact record, which a pipe cannot do.
  // BGZF only: plain gzip (SAM.gz from gzip) has no EOF block, and htslib
  // decompresses it in one thread whatever bgzf_mt is asked.
  const bool bgzf_blocks =
      file->is_bgzf && file->fp.bgzf->is_compressed && !file->fp.bgzf->is_gzip;
  bool threaded = false;
  if (threads > 1 && regular_file) {
    int r = 0;
    if (format == cram) {
      r = hts_set_threads(file, threads);
      threaded = true;
    } else if (bgzf_blocks) {
      r = bgzf_mt(file->fp.bgzf, threads, 256);
      threaded = true;
    }
    if (r != 0) {
      sam_hdr_destroy(header);
      hts_close(file);
      return absl::ResourceExhaustedError(
          absl::StrFormat("%s: can't start %d decode threads", name, threads));
    }
  }
  std::unique_ptr<Input> input(new Input(path, name, file, header, threaded));
  if (regular_file) {
    const uint64_t chunk = std::max<uint64_t>(readahead_chunk, 4096);
    const uint64_t window = std::max<uint64_t>(chunk, uint64_t{16} << 20);
    input->readahead_ = std::make_unique<SequentialReadahead>(
        fd, static_cast<uint64_t>(input_stat.st_size), window, chunk);
  }
  return input;
}

Input::~Input() {
  readahead_.reset();  // Before the descriptor it watches is closed.
  sam_hdr_destroy(header_);
  hts_close(file_);
}

uint64_t EstimateUncompressedSize(const std::string& path) {
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
    constexpr size_t kSample = size_t{8} << 20;
    std::unique_ptr<char[]> buf(new char[1 << 16]);
    size_t read = 0;
    ssize_t n = 0;
    while (read < kSample && (n = bgzf_read(fp, buf.get(), 1 << 16)) > 0) read += n;
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

absl::StatusOr<LoadStats> LoadRecords(Input& input, rocksdb::DB* db,
                                      const LoadOptions& options) {
  std::unique_ptr<bam1_t, BamDeleter> record(bam_init1());
  if (record == nullptr) return absl::ResourceExhaustedError("out of memory");

  rocksdb::WriteOptions write_options;
  write_options.disableWAL = true;  // Scratch data: the input is the log.
  rocksdb::WriteBatch batch(options.batch_bytes + (size_t{1} << 20));

  LoadStats stats;
  RecordChecksum checksum;
  record::EncodedRecord encoded;
  char key_bytes[keycodec::kCoordinateKeySize];
  rocksdb::Slice value_slices[6];
  const rocksdb::Slice key_slice(key_bytes, sizeof(key_bytes));
  const rocksdb::SliceParts key_parts(&key_slice, 1);

  // The lane being filled, and how many entries its active memtable held
  // after the last batch: fewer after a write means RocksDB sealed the
  // memtable (switched to a new one) while applying it.
  const std::vector<rocksdb::ColumnFamilyHandle*> lanes =
      options.lanes.empty() ? std::vector<rocksdb::ColumnFamilyHandle*>{db->DefaultColumnFamily()}
                            : options.lanes;
  size_t lane = 0;
  uint64_t lane_entries = 0;
  auto flush_batch = [&]() -> absl::Status {
    if (batch.Count() == 0) return absl::OkStatus();
    rocksdb::Status s = db->Write(write_options, &batch);
    if (!s.ok()) return FromRocks(input, s);
    if (lanes.size() > 1) {
      uint64_t entries = 0;
      db->GetIntProperty(lanes[lane], rocksdb::DB::Properties::kNumEntriesActiveMemTable,
                         &entries);
      if (entries <= lane_entries) {
        lane = (lane + 1) % lanes.size();
        db->GetIntProperty(lanes[lane], rocksdb::DB::Properties::kNumEntriesActiveMemTable,
                           &entries);
      }
      lane_entries = entries;
    }
    batch.Clear();
    if (options.cancelled != nullptr &&
        options.cancelled->load(std::memory_order_relaxed)) {
      return absl::CancelledError("interrupted while loading");
    }
    if (options.after_batch) return options.after_batch(stats.records);
    return absl::OkStatus();
  };

  // Virtual offset of the next record, for LocateReadError.
  htsFile* const file = input.file();
  const bool has_offsets = file->is_bgzf && file->fp.bgzf != nullptr;
  int64_t next_offset = has_offsets ? bgzf_tell(file->fp.bgzf) : -1;
  auto read_error = [&](int code) {
    uint64_t record_number = stats.records + 1;
    if (input.threaded()) {
      // Threads decode ahead and drop what they queued: re-read (only a
      // regular file; Open does not thread other inputs) from the first
      // record not delivered to find the one that fails.
      const std::pair<uint64_t, int> located =
          LocateReadError(input.path(), next_offset, record_number);
      if (located.first != 0) std::tie(record_number, code) = located;
    }
    // htslib's own reason (which field, which reference) is logged with -v
    // only: a failure is one line.
    return absl::DataLossError(
        absl::StrFormat("%s: record %d: %s (htslib error %d; -v shows htslib's reason)",
                        input.name(), record_number, DescribeReadError(code, input.file()), code));
  };
  for (;;) {
    const int r = sam_read1(input.file(), input.mutable_header(), record.get());
    if (r == -1) {  // End of stream, unless the BGZF layer says otherwise.
      if (BgzfFailed(input.file())) return read_error(-2);
      break;
    }
    const uint64_t record_number = stats.records + 1;
    if (r < -1) return read_error(r);
    const bam1_core_t& c = record->core;
    if (absl::Status s = keycodec::CheckCoordinate(c.tid, c.pos); !s.ok()) {
      return RecordError(input, record_number, record.get(), s.message());
    }
    if (absl::Status s = record::EncodeRecord(*record, &encoded); !s.ok()) {
      return RecordError(input, record_number, nullptr, s.message());
    }
    keycodec::EncodeCoordinateKey(
        {c.tid, c.pos, (c.flag & BAM_FREVERSE) != 0, stats.records}, key_bytes);
    for (int i = 0; i < encoded.num_parts; ++i) {
      value_slices[i] =
          rocksdb::Slice(encoded.parts[i].data(), encoded.parts[i].size());
      checksum.AddPiece(encoded.parts[i].data(), encoded.parts[i].size());
    }
    checksum.EndRecord();
    rocksdb::Status s = batch.Put(
        lanes[lane], key_parts, rocksdb::SliceParts(value_slices, encoded.num_parts));
    if (!s.ok()) return FromRocks(input, s);
    ++stats.records;
    stats.record_bytes += encoded.total_size;
    if (has_offsets) next_offset = bgzf_tell(file->fp.bgzf);
    if (batch.GetDataSize() >= options.batch_bytes) RETURN_IF_ERROR(flush_batch());
  }
  RETURN_IF_ERROR(flush_batch());
  stats.checksum = checksum.value();
  // htslib notes a missing BGZF EOF block or CRAM EOF container when it
  // reaches the end, from a file (threaded or not) or a pipe alike.
  stats.missing_eof_marker =
      (has_offsets && file->fp.bgzf->no_eof_block) ||
      (hts_get_format(file)->format == cram && cram_eof(file->fp.cram) == 2);
  return stats;
}

}  // namespace rocksort::loader
