// libFuzzer target for src/loader and src/record: the fuzzer's bytes are an
// input file (SAM, BAM, SAM.gz, CRAM or anything else htslib may take them
// for), opened with loader::Input::Open and read with loader::RecordReader
// in small batches into a sink that checks every keyed record as it comes.
//
// Checked for every input:
//   * Open and ReadBatch return a Status; they never crash, leak or touch
//     memory out of bounds (ASan, UBSan and LeakSanitizer watch that);
//   * every record added is a self-consistent BAM record: block_size + 4
//     is its size, the variable-length fields fit in it, and its tid, pos,
//     strand and input index are the ones in its coordinate key; it decodes
//     (record::DecodeRecord) and encodes again to the same bytes;
//   * read a second time in the minimiser order (-M, a k from 1 to 31 taken
//     from the input's size), the same holds for placed records, and every
//     unplaced one (rewritten by the encoder: reverse-complemented or not)
//     has a 24-byte key of tid -1 with its strand and input index, and pos
//     -1, mate pos -1 and template length 0;
//   * when reading succeeds, the records and bytes added are the ones
//     reported, and the input indexes run 0, 1, 2...
// A violated check calls __builtin_trap(), which libFuzzer reports as a crash
// and saves the input.
//
// The input is written to a memfd and opened as /proc/self/fd/N, because
// htslib opens inputs by path.

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "htslib/hts.h"
#include "keycodec/keycodec.h"
#include "loader/loader.h"
#include "record/record.h"

namespace rocksort::loader {
namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

uint32_t GetLittleEndian32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// The memfd that holds the current input, created once, and the path htslib
// opens it by.
struct MemfdInput {
  int fd;
  std::string path;
};

const MemfdInput& Memfd() {
  static const MemfdInput* const memfd = [] {
    const int fd = memfd_create("loader_fuzz_input", MFD_CLOEXEC);
    if (fd < 0) std::abort();
    return new MemfdInput{fd, "/proc/self/fd/" + std::to_string(fd)};
  }();
  return *memfd;
}

// Replaces the memfd's contents with the input; returns its path.
const std::string& WriteInput(const uint8_t* data, size_t size) {
  const MemfdInput& memfd = Memfd();
  if (ftruncate(memfd.fd, 0) != 0) std::abort();
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pwrite(memfd.fd, data + done, size - done, done);
    if (n <= 0) std::abort();
    done += n;
  }
  return memfd.path;
}

uint64_t GetBigEndian64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | static_cast<uint8_t>(p[i]);
  return v;
}

// The key's fields the checks compare with the record.
struct KeyFields {
  int32_t tid = -1;
  int64_t pos = -1;  // Unplaced minimiser keys: -1, the position written.
  bool reverse = false;
  uint64_t seq = 0;
};

// A coordinate key, or a minimiser key (keycodec/minimiser_key.cc: placed
// records have the coordinate key, unplaced ones 24 bytes).
KeyFields ParseKey(absl::string_view key_bytes, bool minimiser) {
  if (minimiser && key_bytes.size() == 24) {
    Check(key_bytes.substr(0, 4) == absl::string_view("\xff\xff\xff\xff", 4));
    const uint64_t strand_seq = GetBigEndian64(key_bytes.data() + 16);
    return {-1, -1, (strand_seq >> 63) != 0, strand_seq & keycodec::kMaxSequence};
  }
  const absl::StatusOr<keycodec::CoordinateKey> key = keycodec::DecodeCoordinateKey(key_bytes);
  Check(key.ok());
  Check(!minimiser || key->tid >= 0);
  return {key->tid, key->pos, key->reverse, key->seq};
}

// Checks one DB value against its key: the BAM record layout (SAM spec 4.2)
// and the fields the key was derived from.
void CheckRecord(absl::string_view key_bytes, absl::string_view value, bool minimiser) {
  const KeyFields key = ParseKey(key_bytes, minimiser);
  Check(keycodec::CheckCoordinate(key.tid, key.pos).ok());

  Check(value.size() >= 36);
  const char* v = value.data();
  const uint32_t block_size = GetLittleEndian32(v);
  Check(uint64_t{block_size} + 4 == value.size());
  Check(static_cast<int32_t>(GetLittleEndian32(v + 4)) == key.tid);
  Check(static_cast<int32_t>(GetLittleEndian32(v + 8)) == key.pos);
  if (minimiser && key.tid == -1) {
    Check(static_cast<int32_t>(GetLittleEndian32(v + 28)) == -1);  // Mate pos.
    Check(GetLittleEndian32(v + 32) == 0);                         // Template length.
  }
  const uint32_t l_read_name = GetLittleEndian32(v + 12) & 0xff;
  const uint32_t flag_nc = GetLittleEndian32(v + 16);
  const uint32_t n_cigar = flag_nc & 0xffff;
  const bool reverse = ((flag_nc >> 16) & 0x10) != 0;
  Check(reverse == key.reverse);
  const uint64_t l_seq = GetLittleEndian32(v + 20);
  // Name (NUL-terminated), CIGAR, packed sequence and qualities, then aux.
  Check(l_read_name >= 1);
  const uint64_t fixed_and_variable =
      32 + uint64_t{l_read_name} + 4 * uint64_t{n_cigar} + (l_seq + 1) / 2 + l_seq;
  Check(fixed_and_variable <= block_size);
  Check(v[36 + l_read_name - 1] == '\0');
}

// Checks each record as the loader adds it.
class CheckingSink : public record::KeyedRecordSink {
 public:
  explicit CheckingSink(bool minimiser) : minimiser_(minimiser) {}

  absl::Status Add(absl::string_view key, const record::EncodedRecord& encoded) override {
    value_.clear();
    encoded.AppendTo(&value_);
    Check(value_.size() == encoded.total_size);
    CheckRecord(key, value_, minimiser_);
    Check(ParseKey(key, minimiser_).seq == records);
    Check(record::DecodeRecord(value_, decoded_.get()).ok());
    record::EncodedRecord again;
    Check(record::EncodeRecord(*decoded_, &again).ok());
    again_.clear();
    again.AppendTo(&again_);
    Check(again_ == value_);
    ++records;
    bytes += value_.size();
    return absl::OkStatus();
  }
  uint64_t records = 0;
  uint64_t bytes = 0;

 private:
  const bool minimiser_;
  std::string value_;
  std::string again_;
  std::unique_ptr<bam1_t, void (*)(bam1_t*)> decoded_{bam_init1(), bam_destroy1};
};

void ReadAll(const std::string& path, const keycodec::SortOrder& order) {
  // Single-threaded decoding keeps runs reproducible.
  absl::StatusOr<std::unique_ptr<Input>> input = Input::Open(path);
  if (!input.ok()) return;
  const absl::StatusOr<std::unique_ptr<keycodec::KeyEncoder>> keys =
      keycodec::MakeKeyEncoder(order, (*input)->header());
  Check(keys.ok());
  RecordReader reader(**input, **keys);
  CheckingSink sink(order.kind == keycodec::OrderKind::kMinimiser);
  absl::Status status;
  for (;;) {
    // Small batches, so that inputs of a few KiB cross several.
    const absl::StatusOr<size_t> added = reader.ReadBatch(4096, sink);
    if (!added.ok()) {
      status = added.status();
      break;
    }
    if (*added == 0) break;
  }
  if (status.ok()) {
    Check(sink.records == reader.stats().records);
    Check(sink.bytes == reader.stats().record_bytes);
  } else {
    // Every failure is reported with a message naming the input.
    Check(!status.message().empty());
  }
}

void FuzzOne(const uint8_t* data, size_t size) {
  const std::string& path = WriteInput(data, size);
  ReadAll(path, keycodec::SortOrder());
  keycodec::SortOrder minimiser;
  minimiser.kind = keycodec::OrderKind::kMinimiser;
  minimiser.minimiser.kmer = static_cast<int>(size % 31) + 1;
  minimiser.minimiser.squash_homopolymers = size % 2 == 0;
  minimiser.minimiser.try_reverse = size % 3 != 0;
  ReadAll(path, minimiser);
}

}  // namespace
}  // namespace rocksort::loader

// htslib trusts sizes in the input: a 40-byte CRAM can make it malloc()
// gigabytes for a container it will then fail to read (htslib 1.16,
// cram_read_container). That is htslib's behaviour, harmless in production
// (the memory is never touched and the read fails), but libFuzzer would stop
// on it as an out-of-memory. Make such requests fail the way they do on a
// machine without overcommit: malloc returns NULL above 2 GiB, and htslib
// reports an error. Memory actually used is still bounded by -rss_limit_mb.
// ASAN_OPTIONS in the environment overrides these.
extern "C" const char* __asan_default_options() {
  return "allocator_may_return_null=1:max_allocation_size_mb=2048";
}

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // htslib's messages about malformed input would drown libFuzzer's output.
  hts_set_log_level(HTS_LOG_OFF);
  // A CRAM input names its reference by MD5; without REF_PATH htslib would
  // fetch it from the EBI server and cache it under ~/.cache. Point it at
  // nothing, and load no hFILE plugins, so that no input (such as an @SQ
  // UR:http://... tag) makes the fuzzer touch the network.
  setenv("REF_PATH", "/nonexistent/rocksort-fuzz/%s", 1);
  unsetenv("REF_CACHE");
  setenv("HTS_PATH", "/nonexistent/rocksort-fuzz", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rocksort::loader::FuzzOne(data, size);
  return 0;
}
