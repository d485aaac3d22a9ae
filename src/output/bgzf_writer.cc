#include "output/bgzf_writer_internal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/coding.h"
#include "common/errors.h"
#include "common/page_cache.h"
#include "common/status_macros.h"
#include "common/thread_usage.h"
#include "libdeflate.h"

namespace rocksort::output {
namespace {

constexpr size_t kHeaderSize = 18;  // gzip header with the 6-byte BC extra field.
constexpr size_t kFooterSize = 8;   // CRC32 + ISIZE.

// Blocks the writer thread takes (and frees) per wake-up, and at most what
// the caller waits for when it runs out of free blocks. One wake-up per
// block and thread cost ~4 context switches per 64 KiB block; the emit
// phase is CPU-bound, so they were CPU taken from compression.
constexpr size_t kHandOffBatch = 8;

constexpr char kEofBlock[28] = {'\x1f', '\x8b', '\x08', '\x04', '\x00', '\x00', '\x00',
                                '\x00', '\x00', '\xff', '\x06', '\x00', 'B',    'C',
                                '\x02', '\x00', '\x1b', '\x00', '\x03', '\x00', '\x00',
                                '\x00', '\x00', '\x00', '\x00', '\x00', '\x00', '\x00'};

// libdeflate level for a zlib-style level, as htslib's bgzf_compress maps it:
// libdeflate has levels up to 12, and its level 6 is faster than zlib's.
int LibdeflateLevel(int level) {
  static constexpr int kMap[] = {0, 1, 2, 3, 5, 6, 7, 8, 10, 12};
  if (level < 0) level = 6;
  return kMap[level > 9 ? 9 : level];
}

struct CompressorDeleter {
  void operator()(libdeflate_compressor* c) const { libdeflate_free_compressor(c); }
};
using Compressor = std::unique_ptr<libdeflate_compressor, CompressorDeleter>;

// Writes the member for `in` to `out`. `compressor` is null for level 0.
size_t CompressMember(absl::string_view in, libdeflate_compressor* compressor, char* out) {
  size_t deflated = 0;
  if (compressor != nullptr) {
    deflated = libdeflate_deflate_compress(compressor, in.data(), in.size(), out + kHeaderSize,
                                           kBgzfMaxBlock - kHeaderSize - kFooterSize);
  }
  if (deflated == 0) {
    // Level 0, or data that does not shrink: one stored deflate block
    // (BFINAL=1, BTYPE=00, LEN, NLEN), as htslib writes for level 0.
    char* p = out + kHeaderSize;
    p[0] = 1;
    PutLittleEndian16(static_cast<uint16_t>(in.size()), p + 1);
    PutLittleEndian16(static_cast<uint16_t>(~in.size()), p + 3);
    std::memcpy(p + 5, in.data(), in.size());
    deflated = in.size() + 5;
  }
  const size_t total = kHeaderSize + deflated + kFooterSize;
  std::memcpy(out,
              "\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff\x06\x00"
              "BC\x02\x00",
              16);
  PutLittleEndian16(static_cast<uint16_t>(total - 1), out + 16);
  const uint32_t crc = libdeflate_crc32(0, in.data(), in.size());
  PutLittleEndian32(crc, out + kHeaderSize + deflated);
  PutLittleEndian32(static_cast<uint32_t>(in.size()), out + kHeaderSize + deflated + 4);
  return total;
}

// Writes iov[0..count) in order, however much the kernel takes per call.
absl::Status WriteAllV(int fd, const std::string& name, iovec* iov, int count) {
  while (count > 0) {
    if (iov->iov_len == 0) {
      ++iov;
      --count;
      continue;
    }
    const ssize_t w = ::writev(fd, iov, count);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat(name, ": write failed"));
    }
    // Nothing taken of a non-empty write: a file system that would never
    // take more (some FUSE ones); retrying would spin.
    if (w == 0) return ErrnoStatus(EIO, absl::StrCat(name, ": write failed (no bytes taken)"));
    size_t left = static_cast<size_t>(w);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, const std::string& name, const char* p, size_t n) {
  iovec v{const_cast<char*>(p), n};
  return WriteAllV(fd, name, &v, 1);
}

// Keeps a sequentially written regular file from filling the page cache:
// every kWritebackStep bytes it starts writeback of what was written
// (sync_file_range), and what was written back kDropLag bytes behind is
// dropped from the cache. The output is never read again, and a page cache
// full of it (dirty pages, which reclaim must first write back) leaves no
// room for the runs the merge reads ahead, and stalls whichever thread
// allocates next in a memory-limited cgroup. Does nothing for pipes,
// terminals and devices.
class WriteBehind {
 public:
  static constexpr uint64_t kWritebackStep = uint64_t{8} << 20;
  static constexpr uint64_t kDropLag = uint64_t{16} << 20;

  explicit WriteBehind(int fd) : fd_(fd) {
    struct stat st;
    const off_t at = ::lseek(fd, 0, SEEK_CUR);
    enabled_ = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && at >= 0;
    if (enabled_) base_ = started_ = dropped_ = static_cast<uint64_t>(at);
  }

  // `bytes` more were written. An error means a write failed: the data is
  // lost.
  absl::Status Wrote(uint64_t bytes, const std::string& name) {
    if (!enabled_) return absl::OkStatus();
    end_ += bytes;
    const uint64_t end = base_ + end_;
    if (end < started_ + kWritebackStep) return absl::OkStatus();
    if (::sync_file_range(fd_, static_cast<off_t>(started_), static_cast<off_t>(end - started_),
                          SYNC_FILE_RANGE_WRITE) != 0) {
      return ErrnoStatus(errno, absl::StrCat(name, ": write failed"));
    }
    started_ = end;
    if (started_ >= dropped_ + kDropLag + kWritebackStep) {
      // Whole folios (common/page_cache.h): one the range only partly
      // covers stays.
      const uint64_t upto = FolioFloor(started_ - kDropLag);
      // Writeback of this range started at least kDropLag bytes ago; wait
      // for it (it is usually done) so that its pages are clean.
      if (::sync_file_range(fd_, static_cast<off_t>(dropped_), static_cast<off_t>(upto - dropped_),
                            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                SYNC_FILE_RANGE_WAIT_AFTER) != 0) {
        return ErrnoStatus(errno, absl::StrCat(name, ": write failed"));
      }
      (void)::posix_fadvise(fd_, static_cast<off_t>(dropped_), static_cast<off_t>(upto - dropped_),
                            POSIX_FADV_DONTNEED);
      dropped_ = upto;
    }
    return absl::OkStatus();
  }

 private:
  const int fd_;
  bool enabled_ = false;
  uint64_t base_ = 0;     // The file offset of the first byte written.
  uint64_t end_ = 0;      // Bytes written since.
  uint64_t started_ = 0;  // Writeback started below this offset.
  uint64_t dropped_ = 0;  // Dropped from the cache below this offset.
};

struct Block {
  uint64_t seq = 0;
  size_t in_len = 0;
  size_t out_len = 0;
  // Records that end in this block and their end offsets in `in`.
  std::vector<std::pair<size_t, IndexEntry>> marks;
  std::unique_ptr<char[]> in{new char[kBgzfMaxInput]};
  std::unique_ptr<char[]> out{new char[kBgzfMaxBlock]};
};

}  // namespace

absl::StatusOr<size_t> CompressBgzfBlock(absl::string_view in, int level, char* out) {
  if (in.size() > kBgzfMaxInput) {
    return absl::InvalidArgumentError("BGZF block input larger than 0xff00 bytes");
  }
  Compressor compressor;
  if (level != 0) {
    compressor.reset(libdeflate_alloc_compressor(LibdeflateLevel(level)));
    if (compressor == nullptr) return absl::ResourceExhaustedError("libdeflate: out of memory");
  }
  return CompressMember(in, compressor.get(), out);
}

absl::string_view BgzfEofBlock() { return absl::string_view(kEofBlock, sizeof(kEofBlock)); }

class BgzfWriter::Impl {
 public:
  Impl(int fd, std::string name, const Options& options)
      : fd_(fd), name_(std::move(name)), level_(options.level), on_record_(options.on_record) {
    const int threads = std::max(1, options.threads);
    const size_t pool =
        2 * static_cast<size_t>(threads) + std::max<size_t>(4, options.queue_blocks);
    done_.assign(pool, nullptr);
    refill_ = std::max<size_t>(1, std::min(kHandOffBatch, pool / 2));
    storage_.reserve(pool);
    for (size_t i = 0; i < pool; ++i) {
      storage_.push_back(std::make_unique<Block>());
      free_.push_back(storage_.back().get());
    }
    for (int i = 0; i < threads; ++i) {
      workers_.emplace_back([this] {
        SetThreadName("rs-bgzf");
        WorkerLoop();
      });
    }
    writer_ = std::thread([this] {
      SetThreadName("rs-write");
      WriterLoop();
    });
  }

  ~Impl() { Stop(); }

  absl::Status Write(absl::string_view data) {
    while (!data.empty()) {
      if (current_ == nullptr) RETURN_IF_ERROR(TakeFreeBlock());
      const size_t n = std::min(data.size(), kBgzfMaxInput - current_->in_len);
      std::memcpy(current_->in.get() + current_->in_len, data.data(), n);
      current_->in_len += n;
      data.remove_prefix(n);
      if (current_->in_len == kBgzfMaxInput) RETURN_IF_ERROR(FlushBlock());
    }
    return absl::OkStatus();
  }

  absl::Status WriteRecord(absl::string_view record, const IndexEntry* entry) {
    if (current_ != nullptr && current_->in_len + record.size() > kBgzfMaxInput) {
      RETURN_IF_ERROR(FlushBlock());
    }
    if (entry == nullptr) return Write(record);
    // Write all but the last byte, then the last one with the mark, so the
    // mark lands in the block where the record ends.
    RETURN_IF_ERROR(Write(record.substr(0, record.size() - 1)));
    if (current_ == nullptr) RETURN_IF_ERROR(TakeFreeBlock());
    current_->in[current_->in_len++] = record.back();
    current_->marks.emplace_back(current_->in_len, *entry);
    if (current_->in_len == kBgzfMaxInput) RETURN_IF_ERROR(FlushBlock());
    return absl::OkStatus();
  }

  absl::StatusOr<uint64_t> WaitForWrites() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](Impl* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
          return self->next_to_write_ == self->next_seq_ || !self->error_.ok();
        },
        this));
    if (!error_.ok()) return error_;
    return bytes_written_;
  }

  absl::Status FlushBlock() {
    if (current_ == nullptr || current_->in_len == 0) return absl::OkStatus();
    absl::MutexLock lock(&mu_);
    current_->seq = next_seq_++;
    to_compress_.push_back(current_);
    current_ = nullptr;
    return error_;
  }

  absl::Status Close() {
    RETURN_IF_ERROR(FlushBlock());
    RETURN_IF_ERROR(WaitForWrites().status());
    Stop();
    RETURN_IF_ERROR(WriteAll(fd_, name_, kEofBlock, sizeof(kEofBlock)));
    absl::MutexLock lock(&mu_);
    bytes_written_ += sizeof(kEofBlock);
    return absl::OkStatus();
  }

  uint64_t bytes_written() {
    absl::MutexLock lock(&mu_);
    return bytes_written_;
  }

  BgzfWriter::Waits waits() {
    absl::MutexLock lock(&mu_);
    return waits_;
  }

 private:
  absl::Status TakeFreeBlock() {
    absl::MutexLock lock(&mu_);
    if (free_.empty()) {
      const absl::Time start = absl::Now();
      // Woken once per refill_ blocks the writer frees, not once per block.
      mu_.Await(absl::Condition(
          +[](Impl* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->free_.size() >= self->refill_ || !self->error_.ok();
          },
          this));
      waits_.caller_blocked_seconds += absl::ToDoubleSeconds(absl::Now() - start);
    }
    if (!error_.ok()) return error_;
    current_ = free_.front();
    free_.pop_front();
    current_->in_len = 0;
    current_->marks.clear();
    return absl::OkStatus();
  }

  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    for (std::thread& t : workers_) t.join();
    writer_.join();
  }

  void WorkerLoop() {
    Compressor compressor;
    if (level_ != 0) compressor.reset(libdeflate_alloc_compressor(LibdeflateLevel(level_)));
    for (;;) {
      Block* block;
      {
        absl::MutexLock lock(&mu_);
        if (to_compress_.empty()) {
          const absl::Time start = absl::Now();
          mu_.Await(absl::Condition(
              +[](Impl* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
                return !self->to_compress_.empty() || self->stopping_;
              },
              this));
          waits_.workers_idle_seconds += absl::ToDoubleSeconds(absl::Now() - start);
        }
        if (to_compress_.empty()) return;
        block = to_compress_.front();
        to_compress_.pop_front();
        if (level_ != 0 && compressor == nullptr) {
          // Hand the block on uncompressed-and-unwritten: the writer drains
          // blocks without writing them once an error is set.
          if (error_.ok()) error_ = absl::ResourceExhaustedError("libdeflate: out of memory");
          done_[block->seq % done_.size()] = block;
          continue;
        }
      }
      block->out_len = CompressMember(absl::string_view(block->in.get(), block->in_len),
                                      compressor.get(), block->out.get());
      absl::MutexLock lock(&mu_);
      done_[block->seq % done_.size()] = block;
    }
  }

  // How many blocks from next_to_write_ on are compressed, up to `limit`
  // and never beyond the blocks in flight (the ring would wrap).
  size_t ReadyRun(size_t limit) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    limit = static_cast<size_t>(std::min<uint64_t>(limit, next_seq_ - next_to_write_));
    size_t n = 0;
    while (n < limit && done_[(next_to_write_ + n) % done_.size()] != nullptr) ++n;
    return n;
  }

  void WriterLoop() {
    std::vector<Block*> batch;
    batch.reserve(kHandOffBatch);
    for (;;) {
      uint64_t address = 0;  // Where batch[0] is written.
      bool drain = false;    // An error is set: free the blocks unwritten.
      {
        absl::MutexLock lock(&mu_);
        // Wakes for kHandOffBatch blocks in order, or for all that were
        // handed off when fewer are (a flush, the end of the stream).
        mu_.Await(absl::Condition(
            +[](Impl* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
              const uint64_t in_flight = self->next_seq_ - self->next_to_write_;
              if (in_flight == 0) return self->stopping_;
              return self->ReadyRun(kHandOffBatch) == std::min<uint64_t>(kHandOffBatch, in_flight);
            },
            this));
        const size_t n = ReadyRun(kHandOffBatch);
        if (n == 0) return;  // Stopping, and every block was written.
        batch.clear();
        for (size_t i = 0; i < n; ++i) {
          Block*& slot = done_[(next_to_write_ + i) % done_.size()];
          batch.push_back(slot);
          slot = nullptr;
        }
        drain = !error_.ok();
        address = bytes_written_;
      }
      absl::Status s;
      uint64_t written = 0;
      if (!drain) {
        iovec iov[kHandOffBatch];
        for (size_t i = 0; i < batch.size(); ++i) {
          iov[i] = {batch[i]->out.get(), batch[i]->out_len};
        }
        s = WriteAllV(fd_, name_, iov, static_cast<int>(batch.size()));
        for (size_t i = 0; s.ok() && i < batch.size(); ++i) {
          const Block& block = *batch[i];
          for (const auto& [end, entry] : block.marks) {
            const uint64_t offset =
                end == block.in_len ? (address + block.out_len) << 16 : address << 16 | end;
            s = on_record_(entry, offset);
            if (!s.ok()) break;
          }
          address += block.out_len;
          written += block.out_len;
        }
        if (s.ok()) s = write_behind_.Wrote(written, name_);
      }
      absl::MutexLock lock(&mu_);
      if (!s.ok() && error_.ok()) error_ = s;
      if (s.ok()) bytes_written_ += written;
      next_to_write_ += batch.size();
      for (Block* block : batch) free_.push_back(block);
    }
  }

  // Constant after construction.
  const int fd_;
  const std::string name_;
  // Only touched by the writer thread.
  WriteBehind write_behind_{fd_};
  const int level_;
  const IndexCallback on_record_;
  std::vector<std::unique_ptr<Block>> storage_;
  size_t refill_ = 1;  // Free blocks that wake a caller waiting for one.
  std::vector<std::thread> workers_;
  std::thread writer_;

  // Only touched by the caller's thread.
  Block* current_ = nullptr;

  absl::Mutex mu_;
  std::deque<Block*> free_ ABSL_GUARDED_BY(mu_);
  std::deque<Block*> to_compress_ ABSL_GUARDED_BY(mu_);
  // Compressed blocks, at seq % size: the blocks in flight (handed off, not
  // yet written) have consecutive seqs and are at most the pool, so no two
  // share a slot.
  std::vector<Block*> done_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_to_write_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_written_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  BgzfWriter::Waits waits_ ABSL_GUARDED_BY(mu_);
};

BgzfWriter::BgzfWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BgzfWriter::~BgzfWriter() = default;

absl::StatusOr<std::unique_ptr<BgzfWriter>> BgzfWriter::Create(int fd, std::string name,
                                                               const Options& options) {
  if (options.level < -1 || options.level > 9) {
    return absl::InvalidArgumentError(
        absl::StrFormat("compression level %d is not in 0..9", options.level));
  }
  return std::unique_ptr<BgzfWriter>(
      new BgzfWriter(std::make_unique<Impl>(fd, std::move(name), options)));
}

absl::Status BgzfWriter::Write(absl::string_view data) { return impl_->Write(data); }
absl::Status BgzfWriter::WriteRecord(absl::string_view record, const IndexEntry* entry) {
  return impl_->WriteRecord(record, entry);
}
absl::StatusOr<uint64_t> BgzfWriter::WaitForWrites() { return impl_->WaitForWrites(); }
absl::Status BgzfWriter::FlushBlock() { return impl_->FlushBlock(); }
absl::Status BgzfWriter::Close() { return impl_->Close(); }
uint64_t BgzfWriter::bytes_written() const { return impl_->bytes_written(); }
BgzfWriter::Waits BgzfWriter::waits() const { return impl_->waits(); }

}  // namespace rocksort::output
