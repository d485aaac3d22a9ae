#include "output/bgzf_writer_internal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "htslib/bgzf.h"
#include "test_util.h"

namespace rocksort::output {
namespace {

using ::rocksort::test_util::ScratchDir;

BgzfWriter::Options WriterOptions(int level, int threads, size_t queue_blocks = 4) {
  BgzfWriter::Options options;
  options.level = level;
  options.threads = threads;
  options.queue_blocks = queue_blocks;
  return options;
}

std::string RandomBytes(size_t n, uint64_t seed, int alphabet) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>('A' + rng() % alphabet);
  return s;
}

// Reads a BGZF file back with htslib: the ground truth for the format.
std::string HtslibDecompress(const std::string& path) {
  BGZF* in = bgzf_open(path.c_str(), "r");
  EXPECT_NE(in, nullptr);
  std::string out;
  char buf[1 << 16];
  ssize_t n;
  while ((n = bgzf_read(in, buf, sizeof(buf))) > 0) out.append(buf, n);
  EXPECT_EQ(n, 0);
  EXPECT_EQ(bgzf_check_EOF(in), 1) << "EOF block missing";
  bgzf_close(in);
  return out;
}

std::string WriteWith(const std::string& path, int level, int threads,
                      const std::vector<std::string>& records, size_t queue_blocks = 4) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  EXPECT_GE(fd, 0);
  absl::StatusOr<std::unique_ptr<BgzfWriter>> writer =
      BgzfWriter::Create(fd, path, WriterOptions(level, threads, queue_blocks));
  EXPECT_TRUE(writer.ok());
  std::string all;
  for (const std::string& r : records) {
    EXPECT_TRUE((*writer)->WriteRecord(r).ok());
    all += r;
  }
  EXPECT_TRUE((*writer)->Close().ok());
  ::close(fd);
  return all;
}

TEST(BgzfWriter, OutputReadsBackWithHtslibAtEveryLevelAndThreadCount) {
  ScratchDir dir;
  std::vector<std::string> records;
  for (int i = 0; i < 3000; ++i) records.push_back(RandomBytes(50 + i % 700, i, 4));
  records.push_back(RandomBytes(200000, 7, 256));  // Larger than a block.
  for (int level : {-1, 0, 1, 6, 9}) {
    for (int threads : {1, 3}) {
      for (size_t queue : {0, 4, 64}) {  // 0 means the minimum, 4.
        const std::string path = dir.File("out.gz");
        const std::string written = WriteWith(path, level, threads, records, queue);
        EXPECT_EQ(HtslibDecompress(path), written)
            << "level " << level << " threads " << threads << " queue " << queue;
      }
    }
  }
}

// The workers' wait for blocks and the caller's wait for free blocks are
// measured: workers with nothing to do for 100 ms, then a caller far faster
// than one worker at level 9.
TEST(BgzfWriter, MeasuresTheWorkersAndTheCallersWaits) {
  ScratchDir dir;
  const std::string path = dir.File("waits.gz");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  absl::StatusOr<std::unique_ptr<BgzfWriter>> writer =
      BgzfWriter::Create(fd, path, WriterOptions(9, 1));
  ASSERT_TRUE(writer.ok());
  ::usleep(100000);
  const std::string data = RandomBytes(8 << 20, 5, 20);
  ASSERT_TRUE((*writer)->Write(data).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  ::close(fd);
  const BgzfWriter::Waits waits = (*writer)->waits();
  // Well below the 100 ms: on a loaded machine the worker may start waiting
  // some time after Create returns.
  EXPECT_GE(waits.workers_idle_seconds, 0.05);
  EXPECT_GT(waits.caller_blocked_seconds, 0.0);
}

TEST(BgzfWriter, EmptyStreamIsJustTheEofBlock) {
  ScratchDir dir;
  const std::string path = dir.File("empty.gz");
  WriteWith(path, 6, 2, {});
  EXPECT_EQ(test_util::ReadFileOrDie(path), std::string(BgzfEofBlock()));
  EXPECT_EQ(HtslibDecompress(path), "");
}

TEST(BgzfWriter, RecordThatFitsNeverStraddlesBlocks) {
  ScratchDir dir;
  const std::string path = dir.File("out.gz");
  // 1000-byte records: 65 fit in a 0xff00 block, the 66th starts a new one.
  std::vector<std::string> records(200, std::string(1000, 'r'));
  WriteWith(path, 1, 2, records);
  BGZF* in = bgzf_open(path.c_str(), "r");
  ASSERT_NE(in, nullptr);
  char buf[1000];
  for (int i = 0; i < 200; ++i) {
    // At each record start the virtual offset's in-block part is a multiple
    // of the record size: no record began near a block end.
    EXPECT_EQ((bgzf_tell(in) & 0xffff) % 1000, 0) << i;
    ASSERT_EQ(bgzf_read(in, buf, sizeof(buf)), 1000);
  }
  bgzf_close(in);
}

TEST(BgzfWriter, IncompressibleBlockStillFitsOneMember) {
  const std::string in = RandomBytes(kBgzfMaxInput, 3, 256);
  std::string out(kBgzfMaxBlock, '\0');
  for (int level : {0, 1, 9}) {
    absl::StatusOr<size_t> n = CompressBgzfBlock(in, level, out.data());
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_LE(*n, kBgzfMaxBlock);
  }
}

TEST(BgzfWriter, WriteErrorIsReportedWithName) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[0]);  // Nobody reads: writes fail with EPIPE (SIGPIPE ignored below).
  signal(SIGPIPE, SIG_IGN);
  absl::StatusOr<std::unique_ptr<BgzfWriter>> writer =
      BgzfWriter::Create(fds[1], "pipe-out", WriterOptions(6, 2));
  ASSERT_TRUE(writer.ok());
  absl::Status status;
  const std::string chunk = RandomBytes(100000, 1, 256);
  for (int i = 0; i < 50 && status.ok(); ++i) status = (*writer)->Write(chunk);
  if (status.ok()) status = (*writer)->Close();
  ::close(fds[1]);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("pipe-out"), std::string::npos) << status;
}

// The end offsets reported for indexing are the virtual offsets htslib's
// reader reports after each record, including a record that ends exactly
// at a block's end (the next block's start) and one spanning blocks.
TEST(BgzfWriter, IndexOffsetsAreThoseHtslibReadsBack) {
  ScratchDir dir;
  std::vector<std::string> records;
  records.push_back(RandomBytes(kBgzfMaxInput / 2, 1, 4));  // Two fill a block
  records.push_back(RandomBytes(kBgzfMaxInput / 2, 2, 4));  // exactly.
  for (int i = 0; i < 500; ++i) records.push_back(RandomBytes(100 + i * 7 % 900, i, 4));
  records.push_back(RandomBytes(200000, 9, 256));  // Spans four blocks.
  for (int i = 0; i < 50; ++i) records.push_back(RandomBytes(300, 1000 + i, 4));
  for (int threads : {1, 3}) {
    const std::string path = dir.File("out.gz");
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    std::vector<std::pair<int32_t, uint64_t>> reported;
    BgzfWriter::Options options = WriterOptions(6, threads);
    options.on_record = [&](const IndexEntry& e, uint64_t end_offset) {
      reported.emplace_back(e.tid, end_offset);
      return absl::OkStatus();
    };
    absl::StatusOr<std::unique_ptr<BgzfWriter>> writer = BgzfWriter::Create(fd, path, options);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Write("header").ok());
    ASSERT_TRUE((*writer)->FlushBlock().ok());
    absl::StatusOr<uint64_t> header_end = (*writer)->WaitForWrites();
    ASSERT_TRUE(header_end.ok());
    for (size_t i = 0; i < records.size(); ++i) {
      IndexEntry e;
      e.tid = static_cast<int32_t>(i);
      ASSERT_TRUE((*writer)->WriteRecord(records[i], &e).ok());
    }
    ASSERT_TRUE((*writer)->Close().ok());
    ::close(fd);
    ASSERT_EQ(reported.size(), records.size());

    BGZF* in = bgzf_open(path.c_str(), "r");
    ASSERT_NE(in, nullptr);
    char header[6];
    ASSERT_EQ(bgzf_read(in, header, 6), 6);
    EXPECT_EQ(static_cast<uint64_t>(bgzf_tell(in)), *header_end << 16);
    std::string buf;
    for (size_t i = 0; i < records.size(); ++i) {
      buf.resize(records[i].size());
      ASSERT_EQ(bgzf_read(in, buf.data(), buf.size()), static_cast<ssize_t>(buf.size()));
      EXPECT_EQ(reported[i].first, static_cast<int32_t>(i));
      EXPECT_EQ(reported[i].second, static_cast<uint64_t>(bgzf_tell(in)))
          << "record " << i << " threads " << threads;
    }
    bgzf_close(in);
  }
}

// The output is never read again: a regular file's pages leave the page
// cache behind the writer (written back, then dropped), so that a long
// output does not crowd out the runs the merge reads ahead.
TEST(BgzfWriter, WrittenOutputLeavesThePageCacheBehindTheWriter) {
  test_util::ScratchDir dir;
  const std::string path = dir.File("out.bgzf");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  BgzfWriter::Options options;
  options.level = 0;  // 64 MiB in, ~64 MiB out.
  absl::StatusOr<std::unique_ptr<BgzfWriter>> writer = BgzfWriter::Create(fd, path, options);
  ASSERT_TRUE(writer.ok());
  const std::string chunk(1 << 20, 'r');
  for (int i = 0; i < 64; ++i) ASSERT_TRUE((*writer)->Write(chunk).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  ::close(fd);
  const int rfd = ::open(path.c_str(), O_RDONLY);
  const off_t size = ::lseek(rfd, 0, SEEK_END);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, rfd, 0);
  ::close(rfd);
  ASSERT_NE(map, MAP_FAILED);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec((size + page - 1) / page);
  ASSERT_EQ(::mincore(map, size, vec.data()), 0);
  ::munmap(map, size);
  size_t resident_in_first_32_mib = 0;
  for (size_t p = 0; p < (32u << 20) / page; ++p) resident_in_first_32_mib += vec[p] & 1;
  if (resident_in_first_32_mib * page == (32u << 20) && ::access("/proc/self/fd", F_OK) != 0) {
    GTEST_SKIP() << "no page cache to observe";
  }
  EXPECT_EQ(resident_in_first_32_mib, 0u);
}

}  // namespace
}  // namespace rocksort::output
