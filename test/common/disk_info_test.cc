#include "common/disk_info.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace rocksort {
namespace {

namespace fs = std::filesystem;

// A fake /sys in which the scratch directory's own device number points at
// `device` (a path below <root>/devices).
class DiskDetectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    struct stat st;
    ASSERT_EQ(::stat(dir_.path().c_str(), &st), 0);
    if (major(st.st_dev) == 0) GTEST_SKIP() << "scratch dir has no block device";
    dev_ = absl::StrCat(major(st.st_dev), ":", minor(st.st_dev));
    root_ = dir_.File("sys");
    fs::create_directories(root_ + "/dev/block");
  }
  void Disk(const std::string& rel, int rotational) {
    fs::create_directories(root_ + "/devices/" + rel + "/queue");
    test_util::WriteFileOrDie(root_ + "/devices/" + rel + "/queue/rotational",
                            absl::StrCat(rotational, "\n"));
  }
  void Link(const std::string& rel) {
    fs::create_directory_symlink(root_ + "/devices/" + rel, root_ + "/dev/block/" + dev_);
  }
  DiskDetection Detect() { return DetectDiskKind(dir_.path(), root_); }

  test_util::ScratchDir dir_;
  std::string dev_, root_;
};

TEST_F(DiskDetectTest, RotationalDiskIsHdd) {
  Disk("sda", 1);
  Link("sda");
  EXPECT_EQ(Detect().kind, DiskKind::kHdd);
}

TEST_F(DiskDetectTest, PartitionUsesItsParentDisk) {
  Disk("nvme0n1", 0);
  fs::create_directories(root_ + "/devices/nvme0n1/nvme0n1p2");
  test_util::WriteFileOrDie(root_ + "/devices/nvme0n1/nvme0n1p2/partition", "2\n");
  Link("nvme0n1/nvme0n1p2");
  const DiskDetection d = Detect();
  EXPECT_EQ(d.kind, DiskKind::kSsd);
  EXPECT_EQ(d.reason, "nvme0n1: not rotational");
}

TEST_F(DiskDetectTest, DeviceMapperOverAnyRotatingDiskIsHdd) {
  Disk("sdb", 0);
  Disk("sdc", 1);
  fs::create_directories(root_ + "/devices/dm-0/slaves");
  fs::create_directory_symlink(root_ + "/devices/sdb", root_ + "/devices/dm-0/slaves/sdb");
  fs::create_directory_symlink(root_ + "/devices/sdc", root_ + "/devices/dm-0/slaves/sdc");
  Link("dm-0");
  EXPECT_EQ(Detect().kind, DiskKind::kHdd);
}

TEST_F(DiskDetectTest, RequestSizeIsTheSmallerOfSectorAndSegmentLimits) {
  Disk("vda", 1);
  test_util::WriteFileOrDie(root_ + "/devices/vda/queue/max_sectors_kb", "4096\n");
  test_util::WriteFileOrDie(root_ + "/devices/vda/queue/max_segments", "254\n");
  test_util::WriteFileOrDie(root_ + "/devices/vda/queue/max_segment_size", "4294967295\n");
  fs::create_directories(root_ + "/devices/vda/vda1");
  test_util::WriteFileOrDie(root_ + "/devices/vda/vda1/partition", "1\n");
  Link("vda/vda1");  // A partition: its disk's queue limits apply.
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const DiskDetection d = Detect();
  EXPECT_EQ(d.request_bytes, std::min<uint64_t>(254 * page, 4096 * 1024));
  EXPECT_EQ(d.max_read_bytes, 4096u * 1024);
}

TEST_F(DiskDetectTest, DeviceMapperUsesItsOwnQueueLimits) {
  Disk("sdb", 1);
  test_util::WriteFileOrDie(root_ + "/devices/sdb/queue/max_sectors_kb", "4096\n");
  Disk("dm-0", 1);  // The stacked device's queue holds the combined limits.
  test_util::WriteFileOrDie(root_ + "/devices/dm-0/queue/max_sectors_kb", "512\n");
  fs::create_directories(root_ + "/devices/dm-0/slaves");
  fs::create_directory_symlink(root_ + "/devices/sdb", root_ + "/devices/dm-0/slaves/sdb");
  Link("dm-0");
  const DiskDetection d = Detect();
  EXPECT_EQ(d.kind, DiskKind::kHdd);
  EXPECT_EQ(d.request_bytes, 512u * 1024);
  EXPECT_EQ(d.max_read_bytes, 512u * 1024);
}

TEST_F(DiskDetectTest, RequestSizeWithoutSegmentLimitIsMaxSectors) {
  Disk("sda", 1);
  test_util::WriteFileOrDie(root_ + "/devices/sda/queue/max_sectors_kb", "1280\n");
  Link("sda");
  EXPECT_EQ(Detect().request_bytes, 1280u * 1024);
}

TEST_F(DiskDetectTest, RequestSizeUnknownWithoutQueueLimits) {
  Disk("sda", 1);
  Link("sda");
  EXPECT_EQ(Detect().request_bytes, 0u);
  EXPECT_EQ(Detect().max_read_bytes, 0u);
}

TEST_F(DiskDetectTest, UnknownDeviceFallsBackToSsdWithReason) {
  const DiskDetection d = Detect();  // No link for the device.
  EXPECT_EQ(d.kind, DiskKind::kSsd);
  EXPECT_NE(d.reason.find("assuming ssd"), std::string::npos);
}

}  // namespace
}  // namespace rocksort
