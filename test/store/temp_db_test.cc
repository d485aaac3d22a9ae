#include "store/temp_db_internal.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "rocksdb/table_properties.h"
#include "store/rocksdb_log_internal.h"
#include "test_util.h"

namespace rocksort::store {
namespace {

using ::rocksort::test_util::ScratchDir;

// Options for a DB that must not exist yet.
rocksdb::Options NewDbOptions() {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.error_if_exists = true;
  return options;
}

TEST(TempDbTest, FreshDirectoryIsNeverAnExistingOne) {
  ScratchDir dir;
  const rocksdb::Options options = NewDbOptions();
  const std::string prefix = dir.File("rocksort.");
  absl::StatusOr<std::unique_ptr<TempDb>> a = TempDb::Create(prefix, options, 1, nullptr);
  absl::StatusOr<std::unique_ptr<TempDb>> b = TempDb::Create(prefix, options, 1, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->dir(), (*b)->dir());
  EXPECT_TRUE((*a)->Destroy().ok());
  EXPECT_EQ(dir.List().size(), 1u);
  b->reset();
  EXPECT_TRUE(dir.List().empty());
}

TEST(TempDbTest, LanesAreColumnFamiliesDestroyedWithTheDb) {
  ScratchDir dir;
  const rocksdb::Options options = NewDbOptions();
  absl::StatusOr<std::unique_ptr<TempDb>> db =
      TempDb::Create(dir.File("rocksort."), options, 3, nullptr);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::vector<rocksdb::ColumnFamilyHandle*>& lanes = (*db)->lanes();
  ASSERT_EQ(lanes.size(), 3u);
  EXPECT_EQ(lanes[0]->GetName(), rocksdb::kDefaultColumnFamilyName);
  EXPECT_EQ(lanes[1]->GetName(), "lane1");
  EXPECT_EQ(lanes[2]->GetName(), "lane2");
  for (rocksdb::ColumnFamilyHandle* lane : lanes) {
    ASSERT_TRUE((*db)->db()->Put(rocksdb::WriteOptions(), lane, "k", "v").ok());
    ASSERT_TRUE((*db)->db()->Flush(rocksdb::FlushOptions(), lane).ok());
  }
  EXPECT_TRUE((*db)->Destroy().ok());
  EXPECT_TRUE((*db)->lanes().empty());
  EXPECT_TRUE(dir.List().empty());
}

// Whether `dir` takes an O_DIRECT open, told apart from TempDb's own probe.
bool OpensDirect(const std::string& dir) {
  const std::string path = dir + "/o_direct_check";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_DIRECT, 0600);
  if (fd >= 0) ::close(fd);
  ::unlink(path.c_str());
  return fd >= 0;
}

// Direct run writes are asked for; the DB keeps them where the file system
// takes O_DIRECT and falls back to the page cache where it does not (tmpfs
// may refuse O_DIRECT), and in both cases its runs read back.
TEST(TempDbTest, DirectWritesOnlyWhereTheFileSystemTakesThem) {
  ScratchDir scratch;
  std::vector<std::string> dirs = {scratch.path()};
  if (std::filesystem::is_directory("/dev/shm")) dirs.push_back("/dev/shm");
  for (const std::string& parent : dirs) {
    SCOPED_TRACE(parent);
    rocksdb::Options options = NewDbOptions();
    options.use_direct_io_for_flush_and_compaction = true;
    absl::StatusOr<std::unique_ptr<TempDb>> db =
        TempDb::Create(parent + "/rocksort-direct.", options, 1, nullptr);
    ASSERT_TRUE(db.ok()) << db.status();
    EXPECT_EQ((*db)->direct_writes(), OpensDirect((*db)->dir()));
    const std::string value(100000, 'v');
    ASSERT_TRUE((*db)->db()->Put(rocksdb::WriteOptions(), "k", value).ok());
    ASSERT_TRUE((*db)->db()->Flush(rocksdb::FlushOptions()).ok());
    std::string got;
    ASSERT_TRUE((*db)->db()->Get(rocksdb::ReadOptions(), "k", &got).ok());
    EXPECT_EQ(got, value);
    const std::string dir = (*db)->dir();
    EXPECT_TRUE((*db)->Destroy().ok());
    EXPECT_FALSE(std::filesystem::exists(dir));
  }
}

// The choice of the runs' compression: in every lane, the runs flushed
// before it keep their compression, those flushed after it have the new
// one, either way.
TEST(TempDbTest, RunsFlushedAfterSetRunCompressionHaveTheNewCompression) {
  ScratchDir scratch;
  rocksdb::Options options = NewDbOptions();
  options.compression = rocksdb::kLZ4Compression;
  options.disable_auto_compactions = true;  // Three runs per lane stay three.
  absl::StatusOr<std::unique_ptr<TempDb>> db =
      TempDb::Create(scratch.path() + "/rocksort-raw.", options, 2, nullptr);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::string value(1000, 'v');
  const auto flush_a_run = [&](int run) {
    for (rocksdb::ColumnFamilyHandle* lane : (*db)->lanes()) {
      for (int i = 0; i < 100; ++i) {
        ASSERT_TRUE((*db)->db()->Put(rocksdb::WriteOptions(), lane,
                                     absl::StrCat(run, "-", 1000 + i), value).ok());
      }
      ASSERT_TRUE((*db)->db()->Flush(rocksdb::FlushOptions(), lane).ok());
    }
  };
  flush_a_run(0);
  ASSERT_TRUE((*db)->SetRunCompression(rocksdb::kNoCompression).ok());
  flush_a_run(1);
  ASSERT_TRUE((*db)->SetRunCompression(rocksdb::kLZ4Compression).ok());
  flush_a_run(2);
  for (rocksdb::ColumnFamilyHandle* lane : (*db)->lanes()) {
    rocksdb::TablePropertiesCollection tables;
    ASSERT_TRUE((*db)->db()->GetPropertiesOfAllTables(lane, &tables).ok());
    std::vector<std::string> compressions;
    for (const auto& [path, properties] : tables) {
      // Runs are named in the order they were written.
      compressions.push_back(absl::StrCat(path.substr(path.size() - 10), " ",
                                          properties->compression_name));
    }
    std::sort(compressions.begin(), compressions.end());
    ASSERT_EQ(compressions.size(), 3u);
    EXPECT_TRUE(absl::EndsWith(compressions[0], " LZ4")) << compressions[0];
    EXPECT_TRUE(absl::EndsWith(compressions[1], " NoCompression")) << compressions[1];
    EXPECT_TRUE(absl::EndsWith(compressions[2], " LZ4")) << compressions[2];
  }
  EXPECT_TRUE((*db)->Destroy().ok());
}

// RocksDB's own LOG file aborted rocksort on a full temp filesystem
// (rocksdb_log.h): a temp DB must never create one, whoever made its options.
TEST(TempDbTest, NeverWritesAnInfoLogFile) {
  ScratchDir dir;
  const rocksdb::Options options = NewDbOptions();
  absl::StatusOr<std::unique_ptr<TempDb>> db =
      TempDb::Create(dir.File("rocksort."), options, 1, nullptr);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)->db()->Put(rocksdb::WriteOptions(), "k", "v").ok());
  ASSERT_TRUE((*db)->db()->Flush(rocksdb::FlushOptions()).ok());
  int tables = 0;
  for (const auto& entry : std::filesystem::directory_iterator((*db)->db_path())) {
    const std::string name = entry.path().filename();
    EXPECT_NE(name.rfind("LOG", 0), 0u) << name;
    if (absl::EndsWith(name, ".sst")) ++tables;
  }
  EXPECT_EQ(tables, 1);  // The listing saw the DB's files.
  EXPECT_TRUE((*db)->Destroy().ok());
  EXPECT_TRUE(dir.List().empty());
}

TEST(TempDbTest, MissingParentDirectoryIsAnErrorNamingIt) {
  rocksdb::Options options;
  options.create_if_missing = true;
  absl::StatusOr<std::unique_ptr<TempDb>> db =
      TempDb::Create("/nonexistent-dir-for-rocksort/x.", options, 1, nullptr);
  ASSERT_FALSE(db.ok());
  EXPECT_NE(db.status().message().find("/nonexistent-dir-for-rocksort/x."), std::string::npos);
}

// Logs `message` at `level` through RocksDB's leveled entry point into a
// logger at `logger_level`, and returns the lines it passed on.
std::vector<std::string> LogThrough(rocksdb::InfoLogLevel logger_level, rocksdb::InfoLogLevel level,
                                    const std::string& message) {
  std::vector<std::string> lines;
  CallbackLogger logger(logger_level, [&](const std::string& line) { lines.push_back(line); });
  rocksdb::Log(level, std::shared_ptr<rocksdb::Logger>(&logger, [](rocksdb::Logger*) {}), "%s",
               message.c_str());
  return lines;
}

TEST(CallbackLoggerTest, PassesOneLineAtOrAboveItsLevelAndDropsTheRest) {
  using rocksdb::InfoLogLevel;
  using Lines = std::vector<std::string>;
  EXPECT_EQ(LogThrough(InfoLogLevel::WARN_LEVEL, InfoLogLevel::WARN_LEVEL, "disk full"),
            Lines{"[WARN] disk full"});
  EXPECT_EQ(LogThrough(InfoLogLevel::WARN_LEVEL, InfoLogLevel::ERROR_LEVEL, "bad\n"),
            Lines{"[ERROR] bad"});
  EXPECT_EQ(LogThrough(InfoLogLevel::WARN_LEVEL, InfoLogLevel::INFO_LEVEL, "flushed"), Lines{});
  // The options dump on open comes as header lines, above every level.
  EXPECT_EQ(LogThrough(InfoLogLevel::WARN_LEVEL, InfoLogLevel::HEADER_LEVEL, "Options"), Lines{});
  EXPECT_EQ(LogThrough(InfoLogLevel::NUM_INFO_LOG_LEVELS, InfoLogLevel::FATAL_LEVEL, "x"), Lines{});
  const Lines cut =
      LogThrough(InfoLogLevel::WARN_LEVEL, InfoLogLevel::WARN_LEVEL, std::string(5000, 'x'));
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_EQ(cut[0].size(), 1023u);
  EXPECT_EQ(cut[0].substr(0, 7), "[WARN] ");
}

}  // namespace
}  // namespace rocksort::store
