// File: store/run_reader.cc
// See run_reader_internal.h for the layout read here and why.
#include "store/run_reader_internal.h"

#include <lz4.h>
#include <snappy-c.h>
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/coding.h"
#include "common/status_macros.h"
#include "rocksdb/compression_type.h"
#include "rocksdb/table.h"

namespace rocksort::store {
namespace {

// The block-based table format (RocksDB 7.8: table/format.h and format.cc).
constexpr uint64_t kBlockBasedTableMagic = 0x88e241b785f4cff7ull;
constexpr size_t kFooterSize = 53;       // The footer of format versions 1..5.
constexpr size_t kFooterVersionAt = 41;  // After the checksum type, two handles, padding.
constexpr size_t kBlockTrailerSize = 5;  // Compression type, fixed32 checksum.
// One read of a run's tail holds the footer and, but in very large runs,
// the index (~40 bytes per 64 KiB block: 6,500 blocks).
constexpr uint64_t kTailReadBytes = 256 * 1024;
// The format version the options plan writes; 4 and 5 encode blocks alike.
constexpr uint32_t kMinFormatVersion = 4;
constexpr uint32_t kMaxFormatVersion = 5;
// The value type of a Put in an internal key's trailer.
constexpr uint8_t kTypeValue = 1;
constexpr size_t kInternalKeyTrailer = 8;
// A data block's restart count shares its fixed32 with the hash-index flag.
constexpr uint32_t kHashIndexFlag = 1u << 31;

// LevelDB's varints: 7 bits a byte, least significant first, the high bit
// set on every byte but the last. Return the byte after, or nullptr when
// the bytes up to `limit` do not hold one.
const char* GetVarint64(const char* p, const char* limit, uint64_t* value) {
  uint64_t result = 0;
  for (uint32_t shift = 0; shift <= 63 && p < limit; shift += 7) {
    const uint64_t byte = static_cast<uint8_t>(*p++);
    result |= (byte & 0x7f) << shift;
    if (byte < 0x80) {
      *value = result;
      return p;
    }
  }
  return nullptr;
}

const char* GetVarint32(const char* p, const char* limit, uint32_t* value) {
  uint64_t v = 0;
  p = GetVarint64(p, limit, &v);
  if (p == nullptr || v > UINT32_MAX) return nullptr;
  *value = static_cast<uint32_t>(v);
  return p;
}

// The block checksum of kXXH3 (RocksDB's ComputeBuiltinChecksumWithLastByte):
// the low 32 bits of XXH3 over the contents, mixed with the type byte.
uint32_t Xxh3BlockChecksum(const char* contents, size_t size, char type) {
  constexpr uint32_t kRandomPrime = 0x6b9083d9;
  const auto v = static_cast<uint32_t>(XXH3_64bits(contents, size));
  return v ^ (static_cast<uint32_t>(static_cast<uint8_t>(type)) * kRandomPrime);
}

using BlockHandle = RunIndex::BlockHandle;

absl::Status Corrupt(absl::string_view path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(path, ": ", what));
}

absl::Status ReadError(absl::string_view path, uint64_t offset, const rocksdb::IOStatus& s) {
  return absl::InternalError(
      absl::StrCat("reading ", path, " at offset ", offset, ": ", s.ToString()));
}

// Verifies the checksum of the block at `handle`, whose contents and
// trailer are at `data`, and points *contents at its decompressed
// contents: in `data` when stored as is, else in *unpacked.
absl::Status DecodeBlock(absl::string_view path, const BlockHandle& handle, const char* data,
                         ByteBuffer* unpacked, absl::string_view* contents) {
  const size_t size = handle.size;
  const char type = data[size];
  if (GetLittleEndian32(data + size + 1) != Xxh3BlockChecksum(data, size, type)) {
    return Corrupt(path, absl::StrCat("checksum mismatch in the block at offset ", handle.offset));
  }
  switch (static_cast<uint8_t>(type)) {
    case rocksdb::kNoCompression:
      *contents = absl::string_view(data, size);
      return absl::OkStatus();
    case rocksdb::kSnappyCompression: {
      size_t n = 0;
      if (snappy_uncompressed_length(data, size, &n) != SNAPPY_OK) break;
      char* const out = unpacked->Reserve(n);
      if (snappy_uncompress(data, size, out, &n) != SNAPPY_OK) break;
      *contents = absl::string_view(out, n);
      return absl::OkStatus();
    }
    case rocksdb::kLZ4Compression:
    case rocksdb::kLZ4HCCompression:
    case rocksdb::kZSTD: {
      // Format version 2 of compressed blocks: the contents' size, then the
      // compressed bytes.
      uint32_t n = 0;
      const char* p = GetVarint32(data, data + size, &n);
      if (p == nullptr) break;
      const size_t packed = size - (p - data);
      char* const out = unpacked->Reserve(n);
      if (static_cast<uint8_t>(type) == rocksdb::kZSTD) {
        const size_t got = ZSTD_decompress(out, n, p, packed);
        if (ZSTD_isError(got) || got != n) break;
      } else {
        if (packed > INT32_MAX || n > INT32_MAX) break;
        const int got = LZ4_decompress_safe(p, out, static_cast<int>(packed), static_cast<int>(n));
        if (got != static_cast<int>(n)) break;
      }
      *contents = absl::string_view(out, n);
      return absl::OkStatus();
    }
    default:
      return Corrupt(path, absl::StrCat("block at offset ", handle.offset, " has compression type ",
                                        static_cast<int>(static_cast<uint8_t>(type)),
                                        ", which rocksort does not write"));
  }
  return Corrupt(path, absl::StrCat("the block at offset ", handle.offset, " does not decompress"));
}

// Reads the block at `handle` into *raw and decodes it (DecodeBlock).
absl::Status ReadBlock(rocksdb::FSRandomAccessFile* file, absl::string_view path,
                       const BlockHandle& handle, ByteBuffer* raw, ByteBuffer* unpacked,
                       absl::string_view* contents) {
  const size_t n = handle.size + kBlockTrailerSize;
  rocksdb::Slice read;
  const rocksdb::IOStatus s =
      file->Read(handle.offset, n, rocksdb::IOOptions(), &read, raw->Reserve(n), nullptr);
  if (!s.ok()) return ReadError(path, handle.offset, s);
  if (read.size() != n) {
    return Corrupt(path, absl::StrCat("short read of the block at offset ", handle.offset));
  }
  return DecodeBlock(path, handle, read.data(), unpacked, contents);
}

// Whether a block at `offset` of `size` bytes, with its trailer, ends at or
// before `end`: offset + size + trailer <= end, without a sum that could
// wrap.
bool BlockEndsBy(uint64_t offset, uint64_t size, uint64_t end) {
  return offset <= end && end - offset >= kBlockTrailerSize &&
         size <= end - offset - kBlockTrailerSize;
}

// The data blocks an index block lists, which must be contiguous from the
// start of the file and end at or before `data_end` (the index's offset).
absl::StatusOr<std::vector<BlockHandle>> ParseIndex(absl::string_view path,
                                                    absl::string_view index, uint64_t data_end) {
  if (index.size() < 4) return Corrupt(path, "index block too short");
  const char* const base = index.data();
  const uint32_t restarts = GetLittleEndian32(base + index.size() - 4);
  if (restarts == 0 || restarts & kHashIndexFlag ||
      (static_cast<uint64_t>(restarts) + 1) * 4 > index.size()) {
    return Corrupt(path, "bad restart array in the index block");
  }
  const char* const restart_array = base + index.size() - 4 - 4 * static_cast<size_t>(restarts);
  // An entry whose key shares no bytes with the previous one (every restart
  // point) holds a full handle; the others, the size's difference from the
  // previous block's (zigzag), at the offset after it and its trailer.
  std::vector<BlockHandle> blocks;
  const char* p = base;
  while (p < restart_array) {
    uint32_t shared = 0;
    uint32_t non_shared = 0;
    p = GetVarint32(p, restart_array, &shared);
    if (p != nullptr) p = GetVarint32(p, restart_array, &non_shared);
    if (p == nullptr || non_shared > static_cast<size_t>(restart_array - p)) {
      return Corrupt(path, "bad entry in the index block");
    }
    p += non_shared;  // The key: a separator, not needed to read in order.
    BlockHandle handle{};
    if (shared == 0) {
      p = GetVarint64(p, restart_array, &handle.offset);
      if (p != nullptr) p = GetVarint64(p, restart_array, &handle.size);
    } else if (!blocks.empty()) {
      uint64_t zigzag = 0;
      p = GetVarint64(p, restart_array, &zigzag);
      const int64_t delta = static_cast<int64_t>(zigzag >> 1) ^ -static_cast<int64_t>(zigzag & 1);
      const BlockHandle& previous = blocks.back();
      handle.offset = previous.offset + previous.size + kBlockTrailerSize;
      handle.size = previous.size + delta;
    } else {
      p = nullptr;
    }
    if (p == nullptr) return Corrupt(path, "bad block handle in the index block");
    const uint64_t expected =
        blocks.empty() ? 0 : blocks.back().offset + blocks.back().size + kBlockTrailerSize;
    if (handle.offset != expected) {
      return Corrupt(path, absl::StrCat("index names a block at offset ", handle.offset,
                                        ", expected one at ", expected));
    }
    if (!BlockEndsBy(handle.offset, handle.size, data_end)) {
      return Corrupt(path, absl::StrCat("index names a block at offset ", handle.offset,
                                        " of ", handle.size, " bytes, past the data's end at ",
                                        data_end));
    }
    blocks.push_back(handle);
  }
  return blocks;
}

absl::string_view FileName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

absl::StatusOr<RunIndex> ReadRunIndex(rocksdb::FSRandomAccessFile* file, const std::string& path,
                                      uint64_t file_size) {
  if (file_size < kFooterSize) return Corrupt(path, "too short for a table's footer");
  // The tail: footer, metaindex, properties and (before them) the index.
  const uint64_t tail = std::min(file_size, kTailReadBytes);
  const uint64_t tail_offset = file_size - tail;
  ByteBuffer buffer;
  rocksdb::Slice read;
  const rocksdb::IOStatus s =
      file->Read(tail_offset, tail, rocksdb::IOOptions(), &read, buffer.Reserve(tail), nullptr);
  if (!s.ok()) return ReadError(path, tail_offset, s);
  if (read.size() != tail) return Corrupt(path, "short read of the footer");
  const char* const f = read.data() + tail - kFooterSize;
  if (GetLittleEndian64(f + kFooterSize - 8) != kBlockBasedTableMagic) {
    return Corrupt(path, "not a block-based table (bad magic number)");
  }
  const uint32_t version = GetLittleEndian32(f + kFooterVersionAt);
  if (version < kMinFormatVersion || version > kMaxFormatVersion) {
    return Corrupt(path, absl::StrCat("table format version ", version, " (expected ",
                                      kMinFormatVersion, "..", kMaxFormatVersion, ")"));
  }
  if (static_cast<uint8_t>(f[0]) != rocksdb::kXXH3) {
    return Corrupt(path,
                   absl::StrCat("checksum type ", static_cast<int>(f[0]), " (expected XXH3)"));
  }
  const char* const end = f + kFooterVersionAt;
  uint64_t unused = 0;
  BlockHandle index{};
  const char* p = GetVarint64(f + 1, end, &unused);  // The metaindex handle.
  if (p != nullptr) p = GetVarint64(p, end, &unused);
  if (p != nullptr) p = GetVarint64(p, end, &index.offset);
  if (p != nullptr) p = GetVarint64(p, end, &index.size);
  if (p == nullptr || !BlockEndsBy(index.offset, index.size, file_size - kFooterSize)) {
    return Corrupt(path, "bad index handle in the footer");
  }
  ByteBuffer unpacked;
  absl::string_view contents;
  if (index.offset >= tail_offset) {
    if (absl::Status st = DecodeBlock(path, index, read.data() + (index.offset - tail_offset),
                                      &unpacked, &contents);
        !st.ok()) {
      return st;
    }
  } else if (absl::Status st = ReadBlock(file, path, index, &buffer, &unpacked, &contents);
             !st.ok()) {
    return st;
  }
  RunIndex result;
  result.file_size = file_size;
  ASSIGN_OR_RETURN(result.blocks, ParseIndex(path, contents, index.offset));
  return result;
}

void RunIndexCache::Add(absl::string_view path, RunIndex index) {
  absl::MutexLock lock(&mu_);
  indexes_.insert_or_assign(std::string(FileName(path)), std::move(index));
}

void RunIndexCache::Remove(absl::string_view path) {
  absl::MutexLock lock(&mu_);
  indexes_.erase(FileName(path));
}

std::optional<RunIndex> RunIndexCache::Take(absl::string_view path, uint64_t file_size) {
  absl::MutexLock lock(&mu_);
  auto it = indexes_.find(FileName(path));
  if (it == indexes_.end()) return std::nullopt;
  std::optional<RunIndex> index;
  if (it->second.file_size == file_size) index = std::move(it->second);
  indexes_.erase(it);
  return index;
}

size_t RunIndexCache::size() const {
  absl::MutexLock lock(&mu_);
  return indexes_.size();
}

void RunIndexListener::OnTableFileCreated(const rocksdb::TableFileCreationInfo& info) {
  if (!info.status.ok() || info.file_path.empty()) return;
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  if (!fs_->NewRandomAccessFile(info.file_path, rocksdb::FileOptions(), &file, nullptr).ok()) {
    return;
  }
  file->Hint(rocksdb::FSRandomAccessFile::kRandom);
  absl::StatusOr<RunIndex> index = ReadRunIndex(file.get(), info.file_path, info.file_size);
  if (index.ok()) cache_->Add(info.file_path, *std::move(index));
}

void RunIndexListener::OnTableFileDeleted(const rocksdb::TableFileDeletionInfo& info) {
  cache_->Remove(info.file_path);
}

absl::StatusOr<std::unique_ptr<RunCursor>> RunCursor::Open(rocksdb::FileSystem* fs,
                                                           const std::string& path,
                                                           RunIndexCache* cache, bool* index_read) {
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  rocksdb::IOStatus s = fs->NewRandomAccessFile(path, rocksdb::FileOptions(), &file, nullptr);
  uint64_t size = 0;
  if (s.ok()) s = fs->GetFileSize(path, rocksdb::IOOptions(), &size, nullptr);
  if (!s.ok()) return absl::InternalError(absl::StrCat("opening ", path, ": ", s.ToString()));
  // As RocksDB opens every table (advise_random_on_open): the prefetching
  // file system reads ahead, and the kernel's own readahead on top would
  // split its requests.
  file->Hint(rocksdb::FSRandomAccessFile::kRandom);
  std::optional<RunIndex> index;
  if (cache != nullptr) index = cache->Take(path, size);
  if (!index.has_value()) {
    ASSIGN_OR_RETURN(index, ReadRunIndex(file.get(), path, size));
    if (index_read != nullptr) *index_read = true;
  }
  return std::unique_ptr<RunCursor>(new RunCursor(path, std::move(file), std::move(index->blocks)));
}

absl::Status RunCursor::Corrupt(absl::string_view what) const {
  return store::Corrupt(path_, what);
}

bool RunCursor::Fail(absl::Status status) {
  status_ = std::move(status);
  p_ = limit_ = nullptr;
  next_block_ = blocks_.size();
  return false;
}

bool RunCursor::LoadNextBlock() {
  while (next_block_ < blocks_.size()) {
    absl::string_view contents;
    const BlockHandle& handle = blocks_[next_block_++];
    block_offset_ = handle.offset;
    if (absl::Status s = ReadBlock(file_.get(), path_, handle, &raw_, &unpacked_, &contents);
        !s.ok()) {
      return Fail(std::move(s));
    }
    if (contents.size() < 4) return Fail(Corrupt("data block too short"));
    const uint32_t restarts = GetLittleEndian32(contents.data() + contents.size() - 4);
    if (restarts & kHashIndexFlag || (static_cast<uint64_t>(restarts) + 1) * 4 > contents.size()) {
      return Fail(
          Corrupt(absl::StrCat("bad restart array in the block at offset ", block_offset_)));
    }
    p_ = contents.data();
    limit_ = contents.data() + contents.size() - 4 - 4 * static_cast<size_t>(restarts);
    if (p_ < limit_) return true;  // An empty block is skipped.
  }
  p_ = limit_ = nullptr;
  return false;
}

bool RunCursor::Next() {
  if (p_ >= limit_ && !LoadNextBlock()) return false;
  uint32_t shared = static_cast<uint8_t>(p_[0]);
  uint32_t non_shared = 0;
  uint32_t value_size = 0;
  const char* p = p_;
  if (limit_ - p >= 3 &&
      (shared | static_cast<uint8_t>(p[1]) | static_cast<uint8_t>(p[2])) < 0x80) {
    non_shared = static_cast<uint8_t>(p[1]);
    value_size = static_cast<uint8_t>(p[2]);
    p += 3;
  } else {
    p = GetVarint32(p, limit_, &shared);
    if (p != nullptr) p = GetVarint32(p, limit_, &non_shared);
    if (p != nullptr) p = GetVarint32(p, limit_, &value_size);
  }
  if (p == nullptr || shared > key_size_ ||
      static_cast<uint64_t>(non_shared) + value_size > static_cast<size_t>(limit_ - p)) {
    return Fail(Corrupt(absl::StrCat("bad entry in the block at offset ", block_offset_)));
  }
  key_size_ = shared + non_shared;
  char* const key = key_buffer_.Reserve(key_size_, shared);
  std::memcpy(key + shared, p, non_shared);
  p += non_shared;
  if (key_size_ < kInternalKeyTrailer ||
      static_cast<uint8_t>(key[key_size_ - kInternalKeyTrailer]) != kTypeValue) {
    return Fail(Corrupt(
        absl::StrCat("an entry in the block at offset ", block_offset_, " is not a value")));
  }
  key_ = absl::string_view(key, key_size_ - kInternalKeyTrailer);
  value_ = absl::string_view(p, value_size);
  p_ = p + value_size;
  return true;
}

bool MemtableCursor::Next() {
  if (positioned_) {
    if (!iterator_->Valid()) return false;  // At the end already.
    iterator_->Next();
  } else {
    iterator_->SeekToFirst();
    positioned_ = true;
  }
  if (!iterator_->Valid()) {
    key_ = value_ = absl::string_view();
    const rocksdb::Status s = iterator_->status();
    if (!s.ok()) {
      status_ =
          absl::InternalError(absl::StrCat("reading the memtables of ", lane_, ": ", s.ToString()));
    }
    return false;
  }
  const rocksdb::Slice key = iterator_->key();
  const rocksdb::Slice value = iterator_->value();
  key_ = absl::string_view(key.data(), key.size());
  value_ = absl::string_view(value.data(), value.size());
  return true;
}

RunMerger::RunMerger(std::vector<std::unique_ptr<SortedCursor>> runs, size_t readahead)
    : runs_(std::move(runs)),
      prefix_(runs_.size(), UINT64_MAX),
      ended_(runs_.size(), 1),
      tree_(std::max<size_t>(runs_.size(), 1), 0),
      readahead_(readahead) {}

bool RunMerger::Advance(int i) {
  SortedCursor& run = *runs_[i];
  if (!run.Next()) {
    ended_[i] = 1;
    prefix_[i] = UINT64_MAX;
    if (!run.status().ok()) {
      status_ = absl::Status(
          run.status().code(),
          absl::StrCat("reading the temporary database failed: ", run.status().message()));
      return false;
    }
    return true;
  }
  ended_[i] = 0;
  const absl::string_view key = run.key();
  if (key.size() >= 8) {
    prefix_[i] = GetBigEndian64(key.data());
  } else {
    char padded[8] = {};
    std::memcpy(padded, key.data(), key.size());
    prefix_[i] = GetBigEndian64(padded);
  }
  return true;
}

bool RunMerger::Before(int a, int b) const {
  // An ended run's prefix is the largest, so the prefixes alone decide
  // against it unless a live key's prefix is all 0xff too.
  if (prefix_[a] != prefix_[b]) return prefix_[a] < prefix_[b];
  if (ended_[a] || ended_[b]) return !ended_[a] && ended_[b];
  return runs_[a]->key() < runs_[b]->key();
}

void RunMerger::Build() {
  const int k = static_cast<int>(runs_.size());
  if (k <= 1) {
    tree_[0] = 0;
    return;
  }
  // winner[n]: the run that wins node n's subtree; leaves are k + i.
  std::vector<int> winner(k);
  for (int n = k - 1; n >= 1; --n) {
    const int left = 2 * n < k ? winner[2 * n] : 2 * n - k;
    const int right = 2 * n + 1 < k ? winner[2 * n + 1] : 2 * n + 1 - k;
    const bool left_wins = !Before(right, left);
    winner[n] = left_wins ? left : right;
    tree_[n] = left_wins ? right : left;
  }
  tree_[0] = winner[1];
}

void RunMerger::Replay(int run) {
  const int k = static_cast<int>(runs_.size());
  int current = run;
  for (int n = (run + k) / 2; n >= 1; n /= 2) {
    if (Before(tree_[n], current)) std::swap(tree_[n], current);
  }
  tree_[0] = current;
}

absl::Status RunMerger::Start() {
  if (started_) return status_;
  started_ = true;
  for (int i = 0; i < static_cast<int>(runs_.size()); ++i) {
    if (!Advance(i)) return status_;
  }
  if (!runs_.empty()) Build();
  return status_;
}

bool RunMerger::Next(absl::string_view* value) {
  if (!started_ && !Start().ok()) return false;
  if (!status_.ok() || runs_.empty()) return false;
  if (returned_) {
    // The record returned last is passed now, not before: it stays valid
    // until this call.
    const int last = tree_[0];
    if (!Advance(last)) return false;
    Replay(last);
  }
  returned_ = true;
  const int winner = tree_[0];
  if (ended_[winner]) return false;
  *value = runs_[winner]->value();
  return true;
}

}  // namespace rocksort::store
