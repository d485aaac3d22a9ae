// libFuzzer target for src/loader: the fuzzer's bytes are an input file
// (SAM, BAM, SAM.gz, CRAM or anything else htslib may take them for), opened
// with loader::Input::Open and loaded with loader::LoadRecords into a fresh
// RocksDB that lives in memory (rocksdb::NewMemEnv), with the options the
// real sort uses for a small budget (compaction_policy::MakePlan), so that
// the vector memtable and flushes are the production ones.
//
// Checked for every input:
//   * Open and LoadRecords return a Status; they never crash, leak or touch
//     memory out of bounds (ASan, UBSan and LeakSanitizer watch that);
//   * when loading succeeds, the DB holds exactly the reported records and
//     bytes, keys are well-formed coordinate keys in strictly increasing
//     order, and every value is a self-consistent BAM record: block_size + 4
//     is the value size, the variable-length fields fit in it, and the
//     record's tid, pos, strand and input index are the ones in its key.
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
#include "compaction_policy/compaction_policy.h"
#include "htslib/hts.h"
#include "keycodec/keycodec.h"
#include "loader/loader.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/iterator.h"
#include "rocksdb/options.h"

namespace rocksort::loader {
namespace {

// The DB path inside the in-memory Env; nothing is created on disk.
constexpr char kDbPath[] = "/loader_fuzz/db";

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

// Checks one DB value against its key: the BAM record layout (SAM spec 4.2)
// and the fields the key was derived from.
void CheckRecord(absl::string_view key_bytes, absl::string_view value, uint64_t records) {
  const absl::StatusOr<keycodec::CoordinateKey> key = keycodec::DecodeCoordinateKey(key_bytes);
  Check(key.ok());
  Check(key->seq < records);
  Check(keycodec::CheckCoordinate(key->tid, key->pos).ok());

  Check(value.size() >= 36);
  const char* v = value.data();
  const uint32_t block_size = GetLittleEndian32(v);
  Check(uint64_t{block_size} + 4 == value.size());
  Check(static_cast<int32_t>(GetLittleEndian32(v + 4)) == key->tid);
  Check(static_cast<int32_t>(GetLittleEndian32(v + 8)) == key->pos);
  const uint32_t l_read_name = GetLittleEndian32(v + 12) & 0xff;
  const uint32_t flag_nc = GetLittleEndian32(v + 16);
  const uint32_t n_cigar = flag_nc & 0xffff;
  const bool reverse = ((flag_nc >> 16) & 0x10) != 0;
  Check(reverse == key->reverse);
  const uint64_t l_seq = GetLittleEndian32(v + 20);
  // Name (NUL-terminated), CIGAR, packed sequence and qualities, then aux.
  Check(l_read_name >= 1);
  const uint64_t fixed_and_variable =
      32 + uint64_t{l_read_name} + 4 * uint64_t{n_cigar} + (l_seq + 1) / 2 + l_seq;
  Check(fixed_and_variable <= block_size);
  Check(v[36 + l_read_name - 1] == '\0');
}

void FuzzOne(const uint8_t* data, size_t size) {
  const std::string& path = WriteInput(data, size);
  // Single-threaded decoding keeps runs reproducible.
  absl::StatusOr<std::unique_ptr<Input>> input = Input::Open(path, 1);
  if (!input.ok()) return;

  // The smallest budget the CLI allows: 256 KiB memtables, 64 KiB batches,
  // so that inputs of a few hundred KiB decoded already cross both.
  compaction_policy::PolicyInput policy;
  policy.memory_budget = uint64_t{1} << 20;
  const compaction_policy::SortPlan plan = compaction_policy::MakePlan(policy);
  std::unique_ptr<rocksdb::Env> env(rocksdb::NewMemEnv(rocksdb::Env::Default()));
  rocksdb::Options options = plan.options;
  options.env = env.get();
  // No periodic stats threads; nothing to report.
  options.stats_dump_period_sec = 0;
  options.stats_persist_period_sec = 0;

  rocksdb::DB* raw_db = nullptr;
  Check(rocksdb::DB::Open(options, kDbPath, &raw_db).ok());
  std::unique_ptr<rocksdb::DB> db(raw_db);

  LoadOptions load_options;
  load_options.batch_bytes = plan.batch_bytes;
  const absl::StatusOr<LoadStats> stats = LoadRecords(**input, db.get(), load_options);
  if (stats.ok()) {
    uint64_t records = 0;
    uint64_t bytes = 0;
    std::string previous_key;
    // The iterator must be destroyed before the DB.
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const rocksdb::Slice k = it->key();
      const rocksdb::Slice v = it->value();
      const absl::string_view key(k.data(), k.size());
      Check(records == 0 || previous_key < key);
      previous_key.assign(key.data(), key.size());
      CheckRecord(key, absl::string_view(v.data(), v.size()), stats->records);
      ++records;
      bytes += v.size();
    }
    Check(it->status().ok());
    Check(records == stats->records);
    Check(bytes == stats->record_bytes);
  } else {
    // Every failure is reported with a message naming the input.
    Check(!stats.status().message().empty());
  }

  Check(db->Close().ok());
  db.reset();
  Check(rocksdb::DestroyDB(kDbPath, options).ok());
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
