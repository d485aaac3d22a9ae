// File: store/run_reader_internal.h  (internal to store/ and its tests)
// -----------------------------------------------------------------------------
// The final merge: every sorted run read front to back by a cursor of our
// own, merged by a loser tree.
//
// Why not RocksDB's iterators: on two cores the emit phase is CPU-bound,
// and every CPU second its merging thread spends is taken from the
// compressors. Through a DB iterator each record passes a DBIter, a
// MergingIterator heap of every run and a block-based table iterator per
// run; Debian's RocksDB is built with its assertions on, so each step also
// re-checks its children's status. Those layers were about three fifths of
// the merging thread in profiles. What the final merge needs is far less:
// every run is read once, in order, every key is unique and every entry a
// plain value (the loader only puts).
//
// RunCursor reads one run, a table file the store wrote with the options
// plan's table options (options_plan.cc: block-based format version 5,
// XXH3 block checksums, one binary-search index block). It takes the list
// of data blocks from the run's index, then reads each block in order: checksum
// verified, decompressed (LZ4, Snappy, ZSTD or stored as is) into a buffer
// it owns, entries decoded in place. A run in any other shape (format
// version, checksum type, compression, index kind, an entry that is not a
// value) is an error naming the file, never a guess. The layout it reads is
// RocksDB's block-based table format:
//
//   file    = data block* meta blocks* metaindex block, index block, footer
//   block   = contents, type (1 byte: compression), checksum (fixed32)
//   footer  = checksum type (1), metaindex handle, index handle (varint64
//             offset and size each), zero padding to 41 bytes,
//             format version (fixed32), magic (fixed64): 53 bytes
//   entry   = shared, non_shared, value_length (varint32 each),
//             key[shared..] (non_shared bytes), value
//             then the restart array (fixed32 each) and its count (fixed32)
//   index entries (format version >= 4): shared, non_shared, key delta,
//             then, where shared is 0 (every restart point), a full handle,
//             elsewhere the size's difference from the previous one
//             (zigzag varint64), the offset following the previous block
//             and its trailer
//   key     = user key, then fixed64 (sequence << 8 | type)
//
// Reads go through the store's prefetching file system, as RocksDB's did:
// each run's next chunk is in the page cache before the cursor needs it,
// and what it has passed is released behind it.
//
// A run's index is read when RocksDB has written the run, from the page
// cache (RunIndexListener, RunIndexCache); the cursor reads it from the
// file (one read of its tail) only where that did not happen.
//
// Memory per run: its index (16 bytes a block), the block as read and, for
// a compressed block, its decompressed contents: the two blocks per run the
// options plan counts for the final merge.
//
// MemtableCursor reads the records still in a lane's memtables, through a
// RocksDB iterator over them alone (ReadTier::kMemtableTier), where the
// store keeps them for the final merge instead of flushing them
// (store.cc, FinishLoading).
//
// RunMerger merges the cursors of every run, of every lane, and of the
// memtables, with a loser tree (one comparison per level per record) on the
// keys' first 8 bytes, cached as an integer, then the whole key where those
// tie.
//
// Thread-safety: none for cursors and mergers (one thread uses each); the
// index cache is thread-safe.
#ifndef ROCKSORT_STORE_RUN_READER_INTERNAL_H_
#define ROCKSORT_STORE_RUN_READER_INTERNAL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "rocksdb/file_system.h"
#include "rocksdb/iterator.h"
#include "rocksdb/listener.h"
#include "store/store.h"

namespace rocksort::store {

// A growable byte buffer that does not initialize what it allocates.
class ByteBuffer {
 public:
  // Returns room for `n` bytes, keeping the first `keep` (<= n) of what
  // it held.
  char* Reserve(size_t n, size_t keep = 0) {
    if (n > capacity_) {
      capacity_ = std::max(n, capacity_ + capacity_ / 2);
      std::unique_ptr<char[]> grown(new char[capacity_]);
      if (keep > 0) std::memcpy(grown.get(), data_.get(), keep);
      data_ = std::move(grown);
    }
    return data_.get();
  }
  char* data() const { return data_.get(); }

 private:
  std::unique_ptr<char[]> data_;
  size_t capacity_ = 0;
};

// Where a run's data blocks are, from its footer and index.
struct RunIndex {
  struct BlockHandle {
    uint64_t offset;
    uint64_t size;  // Without the trailer.
  };
  uint64_t file_size = 0;
  std::vector<BlockHandle> blocks;
};

// Reads the footer and index of the run `file` (`file_size` bytes, named
// `path` in errors): one read of the file's tail, which holds the footer
// and, unless it is very large, the index.
absl::StatusOr<RunIndex> ReadRunIndex(rocksdb::FSRandomAccessFile* file, const std::string& path,
                                      uint64_t file_size);

// The indexes of the runs, read as each run is written (its tail is still
// in the page cache then; store.cc's RunIndexListener), so that the final
// merge need not wait for a seek per run before its first record: at the
// end of loading the runs' tails have long left the page cache.
// Thread-safe.
class RunIndexCache {
 public:
  // Keyed by the file's name (the last part of its path).
  void Add(absl::string_view path, RunIndex index);
  void Remove(absl::string_view path);
  // The index of `path`, if one was added for a file of `file_size` bytes;
  // it leaves the cache.
  std::optional<RunIndex> Take(absl::string_view path, uint64_t file_size);
  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, RunIndex> indexes_ ABSL_GUARDED_BY(mu_);
};

// Fills a RunIndexCache: reads each run's index as RocksDB finishes writing
// it (in the flush or merge thread, from the page cache) and forgets it when
// RocksDB deletes the run. A run whose index cannot be read here is read by
// the final merge itself, which reports any error.
class RunIndexListener : public rocksdb::EventListener {
 public:
  // Reads through `fs`, which must not prefetch (the scratch file system).
  RunIndexListener(std::shared_ptr<rocksdb::FileSystem> fs, std::shared_ptr<RunIndexCache> cache)
      : fs_(std::move(fs)), cache_(std::move(cache)) {}
  const char* Name() const override { return "RocksortRunIndexListener"; }
  void OnTableFileCreated(const rocksdb::TableFileCreationInfo& info) override;
  void OnTableFileDeleted(const rocksdb::TableFileDeletionInfo& info) override;

 private:
  const std::shared_ptr<rocksdb::FileSystem> fs_;
  const std::shared_ptr<RunIndexCache> cache_;
};

// Sorted entries the final merge reads front to back: a run or memtables.
class SortedCursor {
 public:
  virtual ~SortedCursor() = default;
  // Moves to the next entry (the first, on the first call). Returns false
  // at the end or on an error (then status() says which).
  virtual bool Next() = 0;
  // The entry's user key and value. Valid until the next call to Next().
  absl::string_view key() const { return key_; }
  absl::string_view value() const { return value_; }
  const absl::Status& status() const { return status_; }

 protected:
  absl::string_view key_;
  absl::string_view value_;
  absl::Status status_;
};

class RunCursor : public SortedCursor {
 public:
  // Opens the run at `path` through `fs`, with its index from `cache` when
  // it holds it, else read from the file (then *index_read is set, if
  // given). Errors name the file.
  static absl::StatusOr<std::unique_ptr<RunCursor>> Open(rocksdb::FileSystem* fs,
                                                         const std::string& path,
                                                         RunIndexCache* cache = nullptr,
                                                         bool* index_read = nullptr);

  bool Next() override;

  // Data blocks in the run.
  size_t blocks() const { return blocks_.size(); }

 private:
  using BlockHandle = RunIndex::BlockHandle;

  RunCursor(std::string path, std::unique_ptr<rocksdb::FSRandomAccessFile> file,
            std::vector<BlockHandle> blocks)
      : path_(std::move(path)), file_(std::move(file)), blocks_(std::move(blocks)) {}

  // Reads the next data block into p_/limit_. False at the end or on an error.
  bool LoadNextBlock();
  bool Fail(absl::Status status);
  absl::Status Corrupt(absl::string_view what) const;

  const std::string path_;
  std::unique_ptr<rocksdb::FSRandomAccessFile> file_;
  const std::vector<BlockHandle> blocks_;
  size_t next_block_ = 0;
  uint64_t block_offset_ = 0;    // Of the current block, for messages.
  ByteBuffer raw_;               // A block as read: contents and trailer.
  ByteBuffer unpacked_;          // A compressed block's contents.
  const char* p_ = nullptr;      // The current block's next entry.
  const char* limit_ = nullptr;  // The end of its entries.
  ByteBuffer key_buffer_;        // The current internal key.
  size_t key_size_ = 0;
};

class MemtableCursor : public SortedCursor {
 public:
  // Reads `memtables`, an iterator over one lane's memtables (read tier
  // kMemtableTier), not yet positioned. `lane` names them in errors.
  MemtableCursor(std::unique_ptr<rocksdb::Iterator> memtables, std::string lane)
      : iterator_(std::move(memtables)), lane_(std::move(lane)) {}
  bool Next() override;

 private:
  const std::unique_ptr<rocksdb::Iterator> iterator_;
  const std::string lane_;
  bool positioned_ = false;
};

class RunMerger : public SortedReader {
 public:
  // Merges `runs` (opened, not yet read) by key. `readahead` is what
  // readahead() reports.
  RunMerger(std::vector<std::unique_ptr<SortedCursor>> runs, size_t readahead);

  // Reads each run's first block and plays the first matches (the first
  // Next does, if this was not called): the wait for a first read of every
  // run, before the sink starts.
  absl::Status Start();
  bool Next(absl::string_view* value) override;
  absl::Status status() const override { return status_; }
  size_t readahead() const override { return readahead_; }

 private:
  // Steps run i; false on its error (status_ set).
  bool Advance(int i);
  // Whether run a's entry sorts before run b's; a run at its end sorts last.
  bool Before(int a, int b) const;
  void Build();
  void Replay(int run);

  std::vector<std::unique_ptr<SortedCursor>> runs_;
  std::vector<uint64_t> prefix_;  // Each run's key's first 8 bytes, big-endian.
  std::vector<char> ended_;
  // tree_[0] is the winner; tree_[1..k) the losers of the matches, node n
  // playing nodes 2n and 2n+1, run i the leaf k + i.
  std::vector<int> tree_;
  bool started_ = false;
  bool returned_ = false;  // Next has returned the winner's record.
  const size_t readahead_;
  absl::Status status_;
};

}  // namespace rocksort::store

#endif  // ROCKSORT_STORE_RUN_READER_INTERNAL_H_
