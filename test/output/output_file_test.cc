#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "output/output.h"
#include "test_util.h"

namespace rocksort::output {
namespace {

using ::rocksort::test_util::ScratchDir;

TEST(OutputFileTest, UncommittedOutputIsRemoved) {
  ScratchDir dir;
  {
    absl::StatusOr<std::unique_ptr<OutputFile>> out =
        OutputFile::Create(dir.File("o.bam"), nullptr);
    ASSERT_TRUE(out.ok());
    ASSERT_EQ(::write((*out)->fd(), "x", 1), 1);
    EXPECT_EQ(dir.List().size(), 1u);
  }
  EXPECT_TRUE(dir.List().empty());
  absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create(dir.File("o.bam"), nullptr);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE((*out)->Finish().ok());
  ASSERT_TRUE((*out)->Commit().ok());
  EXPECT_EQ(dir.List(), std::vector<std::string>{"o.bam"});
}

// Writes `data` to `out`, then finishes and commits it.
void WriteAndCommit(OutputFile* out, absl::string_view data) {
  ASSERT_EQ(::write(out->fd(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ASSERT_TRUE(out->Finish().ok());
  ASSERT_TRUE(out->Commit().ok());
}

bool IsSymlink(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

// An output that is a symlink keeps the link: the new file replaces the
// link's target (as writing through it would), and the partial file goes
// beside the target, not beside the link.
TEST(OutputFileTest, SymlinkKeepsTheLinkAndReplacesItsTarget) {
  ScratchDir dir;
  ASSERT_EQ(::mkdir(dir.File("real").c_str(), 0700), 0);
  const std::string target = dir.File("real/x.bam");
  test_util::WriteFileOrDie(target, "old");
  const std::string link = dir.File("link.bam");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create(link, nullptr);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE((*out)->is_stream());
  EXPECT_EQ((*out)->name(), link);   // Messages name what the user gave.
  EXPECT_EQ(dir.List().size(), 2u);  // real/ and link.bam: the partial is in real/.
  WriteAndCommit(out->get(), "new");
  EXPECT_TRUE(IsSymlink(link));
  EXPECT_EQ(test_util::ReadFileOrDie(target), "new");
  std::vector<std::string> in_real;
  for (const auto& entry : std::filesystem::directory_iterator(dir.File("real"))) {
    in_real.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(in_real, std::vector<std::string>{"x.bam"});
}

// A dangling symlink as the output: as writing through it would, the new
// file is the one the link names (relative to the link's directory), and
// the link stays.
TEST(OutputFileTest, DanglingSymlinkCreatesTheFileItNames) {
  ScratchDir dir;
  ASSERT_EQ(::mkdir(dir.File("real").c_str(), 0700), 0);
  const std::string link = dir.File("link.bam");
  ASSERT_EQ(::symlink("real/x.bam", link.c_str()), 0);
  absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create(link, nullptr);
  ASSERT_TRUE(out.ok()) << out.status();
  WriteAndCommit(out->get(), "new");
  EXPECT_TRUE(IsSymlink(link));
  ASSERT_TRUE(std::filesystem::exists(dir.File("real/x.bam")));
  EXPECT_EQ(test_util::ReadFileOrDie(dir.File("real/x.bam")), "new");
  EXPECT_EQ(dir.List(), (std::vector<std::string>{"link.bam", "real"}));
}

// A registry that refuses to publish, as InterruptGuard does after a signal.
class RefusingRegistry : public CleanupRegistry {
 public:
  void Register(const std::string& path) override { paths.push_back(path); }
  void Unregister(const std::string&) override {}
  absl::Status Publish(const std::string&, absl::FunctionRef<absl::Status()>) override {
    return absl::CancelledError("interrupted before the output was committed");
  }
  std::vector<std::string> paths;
};

TEST(OutputFileTest, RefusedPublishLeavesNoOutput) {
  ScratchDir dir;
  RefusingRegistry registry;
  {
    absl::StatusOr<std::unique_ptr<OutputFile>> out =
        OutputFile::Create(dir.File("o.bam"), &registry);
    ASSERT_TRUE(out.ok());
    ASSERT_EQ(registry.paths.size(), 1u);
    ASSERT_TRUE((*out)->Finish().ok());
    EXPECT_EQ((*out)->Commit().code(), absl::StatusCode::kCancelled);
  }
  EXPECT_TRUE(dir.List().empty());
}

// The data is renamed before its index: when the data's rename fails, the
// index that was there stays, and the new one goes with the partial files.
// (Renamed the other way, an interruption between the two would leave a
// new index beside the old data, which htslib trusts.)
TEST(OutputFileTest, DataIsRenamedBeforeItsIndex) {
  ScratchDir dir;
  test_util::WriteFileOrDie(dir.File("o.bam.csi"), "old index");
  {
    absl::StatusOr<std::unique_ptr<OutputFile>> out =
        OutputFile::Create(dir.File("o.bam"), nullptr);
    ASSERT_TRUE(out.ok());
    absl::StatusOr<std::unique_ptr<OutputFile>> index =
        OutputFile::Create(dir.File("o.bam.csi"), nullptr);
    ASSERT_TRUE(index.ok());
    ASSERT_FALSE((*index)->is_stream());
    ASSERT_EQ(::write((*out)->fd(), "data", 4), 4);
    ASSERT_EQ(::write((*index)->fd(), "new index", 9), 9);
    ASSERT_TRUE((*out)->Finish().ok());
    ASSERT_TRUE((*index)->Finish().ok());
    // A non-empty directory where the data goes: its rename fails.
    ASSERT_EQ(::mkdir(dir.File("o.bam").c_str(), 0700), 0);
    test_util::WriteFileOrDie(dir.File("o.bam/x"), "x");
    const absl::Status status = (*out)->Commit(index->get());
    EXPECT_FALSE(status.ok());
    EXPECT_NE(status.message().find("o.bam"), absl::string_view::npos) << status;
  }
  ASSERT_TRUE(std::filesystem::exists(dir.File("o.bam.csi")));
  EXPECT_EQ(test_util::ReadFileOrDie(dir.File("o.bam.csi")), "old index");
  EXPECT_EQ(dir.List(), (std::vector<std::string>{"o.bam", "o.bam.csi"}));
}

// A device or FIFO is written in place: renaming a finished file over
// /dev/null (as root) would replace the device node.
TEST(OutputFileTest, DeviceIsWrittenInPlace) {
  struct stat before;
  ASSERT_EQ(::stat("/dev/null", &before), 0);
  ASSERT_TRUE(S_ISCHR(before.st_mode));
  {
    absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create("/dev/null", nullptr);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE((*out)->is_stream());
    ASSERT_EQ(::write((*out)->fd(), "x", 1), 1);
    ASSERT_TRUE((*out)->Finish().ok());
    ASSERT_TRUE((*out)->Commit().ok());
  }
  struct stat after;
  ASSERT_EQ(::stat("/dev/null", &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode));
  EXPECT_EQ(after.st_ino, before.st_ino);
}

TEST(OutputFileTest, FifoIsWrittenInPlace) {
  ScratchDir dir;
  const std::string fifo = dir.File("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A reader, so that opening the FIFO for writing does not block.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  {
    absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create(fifo, nullptr);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(::write((*out)->fd(), "xy", 2), 2);
    ASSERT_TRUE((*out)->Finish().ok());
    ASSERT_TRUE((*out)->Commit().ok());
  }
  char buf[4];
  EXPECT_EQ(::read(reader, buf, sizeof(buf)), 2);
  ::close(reader);
  EXPECT_EQ(dir.List(), std::vector<std::string>{"fifo"});  // No partial file left.
}

}  // namespace
}  // namespace rocksort::output
