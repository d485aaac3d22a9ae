#include "common/open_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "test_util.h"

namespace rocksort {
namespace {

// A fake fd directory: its entries are what is counted.
TEST(CountOpenFiles, CountsTheEntriesAndSubtractsThemFromTheLimit) {
  test_util::ScratchDir dir;
  // Numbers no descriptor of this process has: the entry naming the
  // descriptor that reads the directory is not counted.
  for (const char* fd : {"1000", "1001", "1002", "1003"}) {
    test_util::WriteFileOrDie(dir.File(fd), "");
  }
  const OpenFiles files = CountOpenFiles(dir.path(), 10);
  EXPECT_EQ(files.limit, 10u);
  EXPECT_EQ(files.in_use, 4u);
  EXPECT_EQ(files.free(), 6u);
  EXPECT_EQ((OpenFiles{.limit = 3, .in_use = 4}).free(), 0u);
}

// The process's own: one more open file is one more in use, and the
// descriptor that lists the directory is not counted.
TEST(CountOpenFiles, SeesTheProcesssOwnDescriptors) {
  const OpenFiles before = CountOpenFiles();
  const int fd = open("/proc/self/stat", O_RDONLY);
  ASSERT_GE(fd, 0);
  const OpenFiles after = CountOpenFiles();
  close(fd);
  EXPECT_GE(before.in_use, 3u);  // stdin, stdout, stderr.
  EXPECT_EQ(after.in_use, before.in_use + 1);
  EXPECT_EQ(CountOpenFiles().in_use, before.in_use);
}

// Nothing readable: nothing counted, the limit still known.
TEST(CountOpenFiles, AnUnreadableDirectoryCountsNothing) {
  const OpenFiles files = CountOpenFiles("/nonexistent/fd", 64);
  EXPECT_EQ(files.limit, 64u);
  EXPECT_EQ(files.in_use, 0u);
}

}  // namespace
}  // namespace rocksort
