#include "loader/loader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "htslib/bgzf.h"
#include "keycodec/keycodec.h"
#include "test_util.h"

namespace rocksort::loader {
namespace {

using ::rocksort::test_util::ScratchDir;

// Collects what the loader adds, in order.
class CollectingSink : public record::KeyedRecordSink {
 public:
  absl::Status Add(absl::string_view key, const record::EncodedRecord& record) override {
    std::string value;
    record.AppendTo(&value);
    entries.emplace_back(std::string(key), std::move(value));
    return absl::OkStatus();
  }
  std::vector<std::pair<std::string, std::string>> entries;
};

class LoaderTest : public ::testing::Test {
 protected:
  std::string WriteSam(const std::string& body) {
    const std::string path = dir_.File("in.sam");
    test_util::WriteFileOrDie(path, "@HD\tVN:1.6\n@SQ\tSN:c1\tLN:1000\n@SQ\tSN:c2\tLN:1000\n" + body);
    return path;
  }
  std::unique_ptr<keycodec::KeyEncoder> CoordinateKeys(const Input& input) {
    return *keycodec::MakeKeyEncoder(keycodec::SortOrder(), input.header());
  }

  ScratchDir dir_;
};

TEST_F(LoaderTest, AddsEveryRecordUnderItsKey) {
  const std::string path = WriteSam(
      "a\t0\tc2\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n"
      "b\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\tIIII\n"
      "c\t16\tc1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n"
      "d\t0\tc1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n");
  absl::StatusOr<std::unique_ptr<Input>> input = Input::Open(path);
  ASSERT_TRUE(input.ok()) << input.status();
  const std::unique_ptr<keycodec::KeyEncoder> keys = CoordinateKeys(**input);
  RecordReader reader(**input, *keys);
  CollectingSink sink;
  absl::StatusOr<size_t> added = reader.ReadBatch(size_t{1} << 20, sink);
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(*added, 4u);
  EXPECT_EQ(*reader.ReadBatch(size_t{1} << 20, sink), 0u);  // The end.
  EXPECT_EQ(reader.stats().records, 4u);

  std::sort(sink.entries.begin(), sink.entries.end());
  std::vector<std::string> names;
  uint64_t bytes = 0;
  for (const auto& [key, value] : sink.entries) {
    ASSERT_TRUE(keycodec::DecodeCoordinateKey(key).ok());
    names.push_back(std::string(record::RecordView(value).qname()));
    bytes += value.size();
  }
  // c1:10 forward (d) before reverse (c), then c2, then unmapped.
  EXPECT_EQ(names, (std::vector<std::string>{"d", "c", "a", "b"}));
  EXPECT_EQ(reader.stats().record_bytes, bytes);
}

// htslib's format options apply before any record is read: a filter leaves
// records out as samtools' --input-fmt-option filter= does.
TEST_F(LoaderTest, FormatOptionsApplyToTheInput) {
  const std::string path = WriteSam(
      "a\t0\tc2\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n"
      "b\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\tIIII\n"
      "c\t16\tc1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n");
  InputOptions options;
  options.format_options = {"block_size=65536", "filter=flag.unmap == 0"};
  absl::StatusOr<std::unique_ptr<Input>> input = Input::Open(path, options);
  ASSERT_TRUE(input.ok()) << input.status();
  const std::unique_ptr<keycodec::KeyEncoder> keys = CoordinateKeys(**input);
  RecordReader reader(**input, *keys);
  CollectingSink sink;
  ASSERT_TRUE(reader.ReadBatch(size_t{1} << 20, sink).ok());
  EXPECT_EQ(reader.stats().records, 2u);  // b is unmapped.
  // The whole file was consumed: progress reaches the file's size.
  EXPECT_EQ((*input)->size(), std::filesystem::file_size(path));
  EXPECT_EQ((*input)->bytes_consumed(), (*input)->size());

  for (const char* bad : {"bogus=1", "nthreads=2", "filter=mapq >"}) {
    options.format_options = {bad};
    input = Input::Open(path, options);
    ASSERT_FALSE(input.ok()) << bad;
    EXPECT_EQ(input.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(input.status().message().find(bad), absl::string_view::npos) << input.status();
  }
}

TEST_F(LoaderTest, BatchesStopOnceTheyHoldMaxBytes) {
  std::string body;
  for (int i = 0; i < 100; ++i)
    body += absl::StrCat("r", i, "\t0\tc1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n");
  absl::StatusOr<std::unique_ptr<Input>> input = Input::Open(WriteSam(body));
  ASSERT_TRUE(input.ok());
  const std::unique_ptr<keycodec::KeyEncoder> keys = CoordinateKeys(**input);
  RecordReader reader(**input, *keys, /*first_seq=*/1000);
  CollectingSink sink;
  // Each record is 16 key bytes and ~50 record bytes: 10 fill 600 bytes.
  EXPECT_EQ(*reader.ReadBatch(600, sink), 10u);
  size_t total = 10;
  for (absl::StatusOr<size_t> n; (n = reader.ReadBatch(600, sink)).ok() && *n > 0;) total += *n;
  EXPECT_EQ(total, 100u);
  // Input indexes start at first_seq.
  EXPECT_EQ(keycodec::DecodeCoordinateKey(sink.entries.front().first)->seq, 1000u);
  EXPECT_EQ(keycodec::DecodeCoordinateKey(sink.entries.back().first)->seq, 1099u);
}

TEST_F(LoaderTest, MalformedSamLineIsDataLossNamingFileAndRecord) {
  const std::string path = WriteSam(
      "a\t0\tc1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n"
      "b\t0\tc1\tnot-a-number\t60\t4M\t*\t0\t0\tACGT\tIIII\n");
  absl::StatusOr<std::unique_ptr<Input>> input = Input::Open(path);
  ASSERT_TRUE(input.ok()) << input.status();
  const std::unique_ptr<keycodec::KeyEncoder> keys = CoordinateKeys(**input);
  RecordReader reader(**input, *keys);
  CollectingSink sink;
  const absl::StatusOr<size_t> added = reader.ReadBatch(size_t{1} << 20, sink);
  ASSERT_FALSE(added.ok());
  EXPECT_EQ(added.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(added.status().message().find(path), std::string::npos) << added.status();
  EXPECT_NE(added.status().message().find("record 2"), std::string::npos) << added.status();
}

TEST_F(LoaderTest, MissingInputIsNotFound) {
  absl::StatusOr<std::unique_ptr<Input>> input = Input::Open(dir_.File("nope.bam"));
  ASSERT_FALSE(input.ok());
  EXPECT_EQ(input.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(input.status().message().find("nope.bam"), std::string::npos);
}

// Two files read as their concatenation: input indexes run on into the
// second, whose colliding @RG ID is renamed in header and records; the
// byte counts for progress add up to the files' sizes.
TEST_F(LoaderTest, InputSetReadsInputsAsOneConcatenatedInput) {
  const std::string header = "@HD\tVN:1.6\n@SQ\tSN:c1\tLN:1000\n@RG\tID:g\n";
  const std::string first = dir_.File("first.sam");
  const std::string second = dir_.File("second.sam");
  test_util::WriteFileOrDie(first, header + "a\t0\tc1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\tRG:Z:g\n" +
                                     "b\t0\tc1\t20\t60\t4M\t*\t0\t0\tACGT\tIIII\tRG:Z:g\n");
  test_util::WriteFileOrDie(second, header + "c\t0\tc1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\tRG:Z:g\n");
  absl::StatusOr<std::unique_ptr<InputSet>> set =
      InputSet::Open({first, second}, InputOptions{}, {4096, 4096});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ((*set)->size(), 2u);
  EXPECT_EQ((*set)->name(1), second);
  EXPECT_EQ(sam_hdr_count_lines(const_cast<sam_hdr_t*>(&(*set)->header()), "RG"), 2);
  const uint64_t total = std::filesystem::file_size(first) + std::filesystem::file_size(second);
  EXPECT_EQ((*set)->progress().total_bytes(), total);
  EXPECT_EQ((*set)->progress().bytes_read(), 0u);

  const std::unique_ptr<keycodec::KeyEncoder> keys =
      *keycodec::MakeKeyEncoder(keycodec::SortOrder(), (*set)->header());
  InputSetReader reader(**set, *keys);
  CollectingSink sink;
  size_t added = 0;
  for (absl::StatusOr<size_t> n; (n = reader.ReadBatch(1, sink)).ok() && *n > 0;) added += *n;
  EXPECT_EQ(added, 3u);
  EXPECT_EQ(reader.stats().records, 3u);
  EXPECT_TRUE(reader.missing_eof_marker().empty());
  EXPECT_EQ((*set)->progress().bytes_read(), total);
  ASSERT_EQ(sink.entries.size(), 3u);
  std::vector<std::string> names;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(keycodec::DecodeCoordinateKey(sink.entries[i].first)->seq, i);
    names.push_back(std::string(record::RecordView(sink.entries[i].second).qname()));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c"}));
  // The second file's record carries the renamed ID (its bytes end in it).
  EXPECT_TRUE(absl::EndsWith(sink.entries[0].second, std::string("RGZg\0", 5)));
  EXPECT_TRUE(absl::EndsWith(sink.entries[2].second, std::string("RGZg-15DDB16E\0", 14)));
}

TEST_F(LoaderTest, InputSetTakesStdinOnce) {
  absl::StatusOr<std::unique_ptr<InputSet>> set =
      InputSet::Open({"-", "-"}, InputOptions{}, {0, 0});
  ASSERT_FALSE(set.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(set.status())) << set.status();
}

// Of several inputs, each but the first is closed once its header is read
// and opened again when its turn comes: a file put in its place meanwhile
// is refused, naming it, rather than read under another file's header; a
// FIFO put there is refused without being opened (it would wait for a
// writer).
TEST_F(LoaderTest, InputSetRefusesAnInputReplacedBeforeItsTurn) {
  const std::string header = "@HD\tVN:1.6\n@SQ\tSN:c1\tLN:1000\n";
  const std::string record = "a\t0\tc1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n";
  const std::string first = dir_.File("first.sam");
  const std::string second = dir_.File("second.sam");
  for (const std::string change : {"none", "renamed over", "fifo"}) {
    SCOPED_TRACE(change);
    test_util::WriteFileOrDie(first, header + record);
    std::filesystem::remove(second);
    test_util::WriteFileOrDie(second, header + record + record);
    absl::StatusOr<std::unique_ptr<InputSet>> set =
        InputSet::Open({first, second}, InputOptions{}, {4096, 4096});
    ASSERT_TRUE(set.ok()) << set.status();
    if (change == "renamed over") {
      // Another file of the same size and header.
      const std::string other = dir_.File("other.sam");
      test_util::WriteFileOrDie(other, header + record + record);
      std::filesystem::rename(other, second);
    } else if (change == "fifo") {
      std::filesystem::remove(second);
      ASSERT_EQ(mkfifo(second.c_str(), 0600), 0);
    }
    const std::unique_ptr<keycodec::KeyEncoder> keys =
        *keycodec::MakeKeyEncoder(keycodec::SortOrder(), (*set)->header());
    InputSetReader reader(**set, *keys);
    CollectingSink sink;
    absl::StatusOr<size_t> n;
    while ((n = reader.ReadBatch(1 << 20, sink)).ok() && *n > 0) {
    }
    if (change == "none") {
      ASSERT_TRUE(n.ok()) << n.status();
      EXPECT_EQ(reader.stats().records, 3u);
    } else {
      ASSERT_FALSE(n.ok());
      EXPECT_TRUE(absl::IsFailedPrecondition(n.status())) << n.status();
      EXPECT_TRUE(absl::StrContains(n.status().message(), second)) << n.status();
      EXPECT_EQ(reader.stats().records, 1u);
    }
  }
}

TEST(EstimateUncompressedSize, SumsInputsAndIsUnknownIfOneIs) {
  ScratchDir dir;
  const std::string a = dir.File("a.sam");
  test_util::WriteFileOrDie(a, "@SQ\tSN:c1\tLN:1000\n");
  EXPECT_EQ(EstimateUncompressedSize(std::vector<std::string>{a, a}),
            2 * EstimateUncompressedSize(a));
  EXPECT_NE(EstimateUncompressedSize(a), 0u);
  EXPECT_EQ(EstimateUncompressedSize(std::vector<std::string>{a, "-"}), 0u);
}

// 8 MiB of samples shared by the inputs, at least 1 MiB each; a 1 MiB
// sample past a BAM's header still estimates its size closely.
TEST(EstimateUncompressedSize, InputsShareTheSampleAndOneMebibyteStillEstimates) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  EXPECT_EQ(EstimateSampleBytes(1), 8 * kMiB);
  EXPECT_EQ(EstimateSampleBytes(4), 2 * kMiB);
  EXPECT_EQ(EstimateSampleBytes(8), 1 * kMiB);
  EXPECT_EQ(EstimateSampleBytes(300), 1 * kMiB);
  ScratchDir dir;
  const std::string bam = dir.File("in.bam");
  ASSERT_EQ(test_util::RunCommand(absl::StrCat(test_util::GenReadsBinary(),
                                               " -n 40000 --seed 61 -o ", bam))
                .exit_code,
            0);
  BGZF* fp = bgzf_open(bam.c_str(), "r");
  ASSERT_NE(fp, nullptr);
  std::string buf(1 << 16, '\0');
  uint64_t actual = 0;
  for (ssize_t n; (n = bgzf_read(fp, buf.data(), buf.size())) > 0;) actual += n;
  bgzf_close(fp);
  ASSERT_GT(actual, 8 * kMiB);  // Large enough that 1 MiB is a sample.
  const double estimate = static_cast<double>(EstimateUncompressedSize(bam, kMiB));
  EXPECT_NEAR(estimate / static_cast<double>(actual), 1.0, 0.1);
  // The input list's sum takes each input's share of the sample.
  const std::vector<std::string> eight(8, bam);
  EXPECT_EQ(EstimateUncompressedSize(eight), 8 * EstimateUncompressedSize(bam, kMiB));
}

TEST(InputReadaheadChunk, WholeRequestsTheKernelReadsAtOnce) {
  constexpr uint64_t kMiB = 1 << 20;
  EXPECT_EQ(InputReadaheadChunk(0, 0), 2 * kMiB);
  EXPECT_EQ(InputReadaheadChunk(1016 * 1024, 4096 * 1024), 2 * 1016 * 1024);  // virtio
  EXPECT_EQ(InputReadaheadChunk(1280 * 1024, 1280 * 1024), 1280 * 1024);      // SATA
  EXPECT_EQ(InputReadaheadChunk(0, 512 * 1024), 512 * 1024);
  EXPECT_EQ(InputReadaheadChunk(512 * 1024, 4096 * 1024), 2 * kMiB);
}

}  // namespace
}  // namespace rocksort::loader
