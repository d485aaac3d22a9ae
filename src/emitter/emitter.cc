#include "emitter/emitter.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/record_checksum.h"
#include "common/status_macros.h"
#include "emitter/bgzf_writer.h"
#include "rocksdb/iterator.h"

namespace rocksort::emitter {
namespace {

void AppendLe32(uint32_t v, std::string* out) {
  char b[4];
  std::memcpy(b, &v, 4);  // The BAM format is little-endian, as is the host.
  out->append(b, 4);
}

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
  ASSIGN_OR_RETURN(std::unique_ptr<BgzfWriter> writer,
                   BgzfWriter::Create(fd, out_name, writer_options));
  RETURN_IF_ERROR(writer->Write(header_bytes));
  RETURN_IF_ERROR(writer->FlushBlock());  // Records start a fresh block, as in htslib.

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
      RETURN_IF_ERROR(writer->WriteRecord(absl::string_view(value.data(), value.size())));
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
  return stats;
}

}  // namespace rocksort::emitter
