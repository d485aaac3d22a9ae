#include "common/paths.h"

#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "test_util.h"

namespace rocksort {
namespace {

using ::rocksort::test_util::ScratchDir;

TEST(FitFileNameTest, ShortensOnlyTheLastComponentAndOnlyWhenNeeded) {
  ScratchDir dir;
  if (::pathconf(dir.path().c_str(), _PC_NAME_MAX) != 255) GTEST_SKIP() << "NAME_MAX is not 255";
  // Too long in itself: left to fail when created.
  EXPECT_EQ(FitFileName(dir.File(std::string(300, 'a')), 15), dir.File(std::string(300, 'a')));
  const std::string short_path = dir.File("out.bam");
  EXPECT_EQ(FitFileName(short_path, 16), short_path);
  const std::string long_name(250, 'a');
  // 250 + 15 > 255: the name keeps 240 bytes, the directory all of its own.
  EXPECT_EQ(FitFileName(dir.File(long_name), 15), dir.File(std::string(240, 'a')));
  EXPECT_EQ(FitFileName(long_name, 15), std::string(240, 'a'));
  EXPECT_EQ(FitFileName(long_name, 5), long_name);
  // Not in the middle of a UTF-8 character: "a" then 125 two-byte
  // characters; byte 240 continues the one at 239.
  std::string utf8 = "a";
  for (int i = 0; i < 125; ++i) utf8 += "\xc3\xa9";
  EXPECT_EQ(FitFileName(dir.File(utf8), 15), dir.File(utf8.substr(0, 239)));
}

}  // namespace
}  // namespace rocksort
