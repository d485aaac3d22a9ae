#include "emitter/emitter.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/record_checksum.h"
#include "common/status_macros.h"
#include "emitter/bgzf_writer.h"
#include "htslib/hts.h"
#include "rocksdb/iterator.h"

namespace rocksort::emitter {
namespace {

void AppendLe32(uint32_t v, std::string* out) {
  char b[4];
  std::memcpy(b, &v, 4);  // The BAM format is little-endian, as is the host.
  out->append(b, 4);
}

// What the index needs of an encoded record (loader/bam_record.h: the BAM
// record with its block_size): tid, pos and htslib's bam_endpos.
IndexEntry IndexEntryOf(absl::string_view record) {
  auto le32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, record.data() + at, 4);
    return v;
  };
  IndexEntry e;
  e.tid = static_cast<int32_t>(le32(4));
  e.beg = static_cast<int32_t>(le32(8));
  const size_t l_read_name = static_cast<uint8_t>(record[12]);
  const uint32_t flag_nc = le32(16);
  const uint32_t n_cigar = flag_nc & 0xffff;
  const uint32_t flag = flag_nc >> 16;
  e.mapped = (flag & BAM_FUNMAP) == 0;
  int64_t rlen = 0;
  if (e.mapped) {
    const size_t cigar = 36 + l_read_name;
    for (uint32_t i = 0; i < n_cigar; ++i) {
      const uint32_t op = le32(cigar + 4 * i);
      if (bam_cigar_type(bam_cigar_op(op)) & 2) rlen += bam_cigar_oplen(op);
    }
  }
  e.end = e.beg + (rlen == 0 ? 1 : rlen);
  return e;
}

// Owns an htslib index.
struct IndexDeleter {
  void operator()(hts_idx_t* idx) const { hts_idx_destroy(idx); }
};

// How often the cancellation flag is polled.
constexpr uint64_t kCancelCheckInterval = 4096;

}  // namespace

absl::StatusOr<std::string> EncodeBamHeader(const sam_hdr_t& header) {
  sam_hdr_t* h = const_cast<sam_hdr_t*>(&header);  // htslib lacks const here.
  const char* text = sam_hdr_str(h);
  const size_t l_text = text != nullptr ? sam_hdr_length(h) : 0;
  if (l_text > INT32_MAX) return absl::InvalidArgumentError("header text too long for BAM");
  std::string out("BAM\1", 4);
  AppendLe32(static_cast<uint32_t>(l_text), &out);
  if (l_text > 0) out.append(text, l_text);
  const int n_ref = sam_hdr_nref(h);
  AppendLe32(static_cast<uint32_t>(n_ref), &out);
  for (int i = 0; i < n_ref; ++i) {
    const char* name = sam_hdr_tid2name(h, i);
    const hts_pos_t len = sam_hdr_tid2len(h, i);
    if (len > INT32_MAX) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "reference \"%s\" is %d bases long; BAM holds at most %d", name, len, INT32_MAX));
    }
    const size_t l_name = std::strlen(name) + 1;
    AppendLe32(static_cast<uint32_t>(l_name), &out);
    out.append(name, l_name);
    AppendLe32(static_cast<uint32_t>(len), &out);
  }
  return out;
}

size_t QueueBlocks(const EmitOptions& options) {
  const uint64_t threads = static_cast<uint64_t>(std::max(1, options.threads));
  const uint64_t bytes = static_cast<uint64_t>(options.readahead) * threads / 2;
  return static_cast<size_t>(std::clamp<uint64_t>(bytes / kBgzfMaxInput, 4, 256));
}

absl::StatusOr<EmitStats> EmitBam(rocksdb::DB* db, const sam_hdr_t& header, int fd,
                                  const std::string& out_name, const EmitOptions& options) {
  ASSIGN_OR_RETURN(const std::string header_bytes, EncodeBamHeader(header));
  BgzfWriter::Options writer_options;
  writer_options.level = options.level;
  writer_options.threads = options.threads;
  writer_options.queue_blocks = QueueBlocks(options);
  // Set before the first record and read on the writer thread after it.
  std::unique_ptr<hts_idx_t, IndexDeleter> index;
  const bool indexing = !options.index_path.empty();
  // By the final name: index_path may be a partial file's.
  const bool bai = indexing && absl::EndsWith(options.index_name, ".bai");
  if (indexing) {
    writer_options.on_record = [&index, &options, &header, bai](const IndexEntry& e,
                                                                 uint64_t end_offset) {
      if (hts_idx_push(index.get(), e.tid, e.beg, e.end, end_offset, e.mapped ? 1 : 0) < 0) {
        // In coordinate order a push fails for a span beyond what the
        // format holds (BAI: 2^29 - 1), or for a record placed on a
        // reference without a position (POS 0, from BAM), which samtools
        // cannot index either.
        const char* name =
            e.tid >= 0 ? sam_hdr_tid2name(const_cast<sam_hdr_t*>(&header), e.tid) : nullptr;
        const char* ref = name != nullptr ? name : "*";
        const std::string where = e.beg < 0
                                      ? absl::StrCat(ref, " with no position (POS 0)")
                                      : absl::StrFormat("%s:%d-%d", ref, e.beg + 1, e.end);
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: can't index the record at %s: %s", options.index_name, where,
            e.beg < 0 ? "a record on a reference needs a position to be indexed"
            : bai     ? "BAI cannot hold positions beyond 2^29 - 1; write a CSI index instead"
                      : "a position beyond what the index holds"));
      }
      return absl::OkStatus();
    };
  }
  ASSIGN_OR_RETURN(std::unique_ptr<BgzfWriter> writer,
                   BgzfWriter::Create(fd, out_name, writer_options));
  RETURN_IF_ERROR(writer->Write(header_bytes));
  RETURN_IF_ERROR(writer->FlushBlock());  // Records start a fresh block, as in htslib.
  if (indexing) {
    // As htslib's sam_idx_init: BAI is min_shift 14 with 5 levels; CSI gets
    // the levels the longest reference needs.
    ASSIGN_OR_RETURN(const uint64_t header_end, writer->WaitForWrites());
    sam_hdr_t* h = const_cast<sam_hdr_t*>(&header);
    const int n_ref = sam_hdr_nref(h);
    int min_shift = 14, n_lvls = 5;
    if (!bai) {
      int64_t max_len = 0;
      for (int i = 0; i < n_ref; ++i) max_len = std::max<int64_t>(max_len, sam_hdr_tid2len(h, i));
      max_len += 256;
      n_lvls = 0;
      for (int64_t span = int64_t{1} << min_shift; max_len > span; span <<= 3) ++n_lvls;
    }
    index.reset(hts_idx_init(n_ref, bai ? HTS_FMT_BAI : HTS_FMT_CSI, header_end << 16,
                             min_shift, n_lvls));
    if (index == nullptr) return absl::ResourceExhaustedError("can't create the index");
  }

  rocksdb::ReadOptions read_options;
  read_options.fill_cache = false;  // Every block is read once.
  read_options.verify_checksums = true;
  read_options.readahead_size = options.readahead;
  read_options.async_io = false;

  const std::vector<rocksdb::ColumnFamilyHandle*> lanes =
      options.lanes.empty() ? std::vector<rocksdb::ColumnFamilyHandle*>{db->DefaultColumnFamily()}
                            : options.lanes;
  EmitStats stats;
  RecordChecksum checksum;
  {
    // The iterators must be destroyed before the DB; they live in this scope.
    std::vector<rocksdb::Iterator*> raw;
    if (rocksdb::Status s = db->NewIterators(read_options, lanes, &raw); !s.ok()) {
      return absl::InternalError(
          absl::StrCat("reading the temporary database failed: ", s.ToString()));
    }
    std::vector<std::unique_ptr<rocksdb::Iterator>> its;
    for (rocksdb::Iterator* it : raw) {
      its.emplace_back(it);
      it->SeekToFirst();
    }
    // A few lanes at most: a linear scan for the smallest key is cheaper
    // than a heap (one 16-byte memcmp per record for two lanes).
    for (;;) {
      rocksdb::Iterator* next = nullptr;
      for (const auto& it : its) {
        if (it->Valid() && (next == nullptr || it->key().compare(next->key()) < 0)) {
          next = it.get();
        }
      }
      if (next == nullptr) break;
      const rocksdb::Slice value = next->value();
      const absl::string_view record(value.data(), value.size());
      if (indexing) {
        const IndexEntry entry = IndexEntryOf(record);
        RETURN_IF_ERROR(writer->WriteRecord(record, &entry));
      } else {
        RETURN_IF_ERROR(writer->WriteRecord(record));
      }
      checksum.AddRecord(value.data(), value.size());
      ++stats.records;
      stats.record_bytes += value.size();
      if (stats.records % kCancelCheckInterval == 0 && options.cancelled != nullptr &&
          options.cancelled->load(std::memory_order_relaxed)) {
        return absl::CancelledError("interrupted while writing the output");
      }
      next->Next();
      // A lane that ends on an error fails the output now, not after the
      // other lanes were written.
      if (!next->Valid() && !next->status().ok()) break;
    }
    for (const auto& it : its) {
      if (!it->status().ok()) {
        return absl::InternalError(absl::StrCat(
            "reading the temporary database failed: ", it->status().ToString()));
      }
    }
  }
  // The queue may hold many blocks (QueueBlocks) that Close() compresses
  // first: a signal that came after the last record must not wait for them.
  if (options.cancelled != nullptr && options.cancelled->load(std::memory_order_relaxed)) {
    return absl::CancelledError("interrupted while writing the output");
  }
  RETURN_IF_ERROR(writer->Close());
  stats.checksum = checksum.value();
  stats.bytes_written = writer->bytes_written();
  if (indexing) {
    // The end of the data: where the EOF block starts, as htslib's
    // bgzf_tell after the last record.
    const uint64_t data_end = stats.bytes_written - BgzfEofBlock().size();
    if (hts_idx_finish(index.get(), data_end << 16) != 0 ||
        hts_idx_save_as(index.get(), nullptr, options.index_path.c_str(),
                        bai ? HTS_FMT_BAI : HTS_FMT_CSI) != 0) {
      return absl::UnavailableError(
          absl::StrFormat("%s: can't write the index: %s", options.index_name,
                          errno != 0 ? std::strerror(errno) : "htslib error"));
    }
  }
  return stats;
}

}  // namespace rocksort::emitter
