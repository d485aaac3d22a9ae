// File: test/keycodec/golden_test.cc
// -----------------------------------------------------------------------------
// Every order's keys against what samtools sort 1.23.1 wrote
// (test/data/oracle/ and, for -M, test/data/minimiser/, see their
// README.md): for each input and each mode, the
// input records stable-sorted by key bytes (the order RocksDB's bytewise
// comparator gives, ties by input order as samtools) must print, with
// sam_format1 and as AppendAndRewrite left them, exactly the expected file's
// record lines; the input header
// after ApplySortOrder must equal the expected header (both without @PG).
// Where samtools exits 1 (.error), some record's Append must fail naming MC
// and fixmate.
#include <algorithm>
#include <filesystem>
#include <numeric>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "htslib/bgzf.h"
#include "htslib/kstring.h"
#include "keycodec/keycodec.h"
#include "keycodec/sort_order.h"
#include "keycodec/test_records.h"

namespace rocksort::keycodec {
namespace {

namespace fs = std::filesystem;
using test_util::BamPtr;
using test_util::HeaderPtr;

const std::string kOracle = std::string(ROCKSORT_TEST_DATA) + "/oracle";
const std::string kMinimiserOracle = std::string(ROCKSORT_TEST_DATA) + "/minimiser";

struct Mode {
  const char* name;  // As in the oracle's file names.
  OrderKind kind;
  bool lexicographic;  // -N given.
  const char* tag;
  MinimiserOptions minimiser = {};
};

// The modes of test/data/oracle/README.md, as samtools' flags.
const Mode kModes[] = {
    {"coord", OrderKind::kCoordinate, false, ""},
    {"n", OrderKind::kQueryName, false, ""},
    {"N", OrderKind::kQueryName, true, ""},
    {"tRG", OrderKind::kCoordinate, false, "RG"},
    {"tAS", OrderKind::kCoordinate, false, "AS"},
    {"tXT", OrderKind::kCoordinate, false, "XT"},
    {"tXA", OrderKind::kCoordinate, false, "XA"},
    {"tRGn", OrderKind::kQueryName, false, "RG"},
    {"tASN", OrderKind::kQueryName, true, "AS"},
    {"template", OrderKind::kTemplateCoordinate, false, ""},
};

// The modes of test/data/minimiser/README.md: -M, -K K, -R (forward only),
// -H (squashed).
const Mode kMinimiserModes[] = {
    {"M", OrderKind::kMinimiser, false, "", {20, true, false}},
    {"MR", OrderKind::kMinimiser, false, "", {20, false, false}},
    {"MH", OrderKind::kMinimiser, false, "", {20, true, true}},
    {"MHR", OrderKind::kMinimiser, false, "", {20, false, true}},
    {"MK1", OrderKind::kMinimiser, false, "", {1, true, false}},
    {"MK5", OrderKind::kMinimiser, false, "", {5, true, false}},
    {"MK31", OrderKind::kMinimiser, false, "", {31, true, false}},
    {"MK31R", OrderKind::kMinimiser, false, "", {31, false, false}},
};

struct GoldenCase {
  std::string dir;    // kOracle or kMinimiserOracle.
  std::string input;  // File name under inputs/.
  std::string stem;   // The input's name without .sam / .sam.gz.
  Mode mode;
};

// For GoogleTest's messages: "ties.sam -t RG -n" rather than raw bytes.
void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.input << " mode " << c.mode.name; }

template <size_t N>
std::vector<GoldenCase> CasesIn(const std::string& dir, const Mode (&modes)[N]) {
  std::vector<GoldenCase> cases;
  std::error_code ec;
  std::vector<std::string> inputs;
  for (const fs::directory_entry& e : fs::directory_iterator(dir + "/inputs", ec)) {
    inputs.push_back(e.path().filename().string());
  }
  std::sort(inputs.begin(), inputs.end());
  for (const std::string& input : inputs) {
    const std::string stem = input.substr(0, input.find(".sam"));
    for (const Mode& mode : modes) cases.push_back({dir, input, stem, mode});
  }
  return cases;
}

std::vector<GoldenCase> AllCases() { return CasesIn(kOracle, kModes); }
std::vector<GoldenCase> MinimiserCases() { return CasesIn(kMinimiserOracle, kMinimiserModes); }

// The lines of a SAM text file, plain or gzip-compressed.
std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> lines;
  BGZF* fp = bgzf_open(path.c_str(), "r");
  if (fp == nullptr) {
    ADD_FAILURE() << "cannot open " << path;
    return lines;
  }
  kstring_t line = KS_INITIALIZE;
  while (bgzf_getline(fp, '\n', &line) >= 0) lines.emplace_back(line.s, line.l);
  ks_free(&line);
  bgzf_close(fp);
  return lines;
}

std::vector<std::string> HeaderWithoutPg(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const std::string& l : lines) {
    if (!l.empty() && l[0] == '@' && !absl::StartsWith(l, "@PG\t")) out.push_back(l);
  }
  return out;
}

struct Input {
  HeaderPtr header;
  std::vector<BamPtr> records;
};

Input ReadInput(const std::string& path) {
  Input in;
  samFile* fp = sam_open(path.c_str(), "r");
  if (fp == nullptr) {
    ADD_FAILURE() << "cannot open " << path;
    return in;
  }
  in.header.reset(sam_hdr_read(fp));
  while (true) {
    BamPtr b(bam_init1());
    const int r = sam_read1(fp, in.header.get(), b.get());
    if (r < -1) ADD_FAILURE() << path << ": read error " << r;
    if (r < 0) break;
    in.records.push_back(std::move(b));
  }
  sam_close(fp);
  return in;
}

class GoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenTest, OrderAndHeaderMatchSamtools) {
  const GoldenCase& c = GetParam();
  absl::StatusOr<SortOrder> order =
      SortOrder::FromFlags(c.mode.kind, c.mode.lexicographic, c.mode.tag);
  ASSERT_TRUE(order.ok()) << order.status();
  order->minimiser = c.mode.minimiser;
  const Input in = ReadInput(c.dir + "/inputs/" + c.input);
  ASSERT_NE(in.header, nullptr);
  ASSERT_FALSE(in.records.empty());
  absl::StatusOr<std::unique_ptr<KeyEncoder>> encoder = MakeKeyEncoder(*order, *in.header);
  ASSERT_TRUE(encoder.ok()) << encoder.status();

  const std::string expected_base = c.dir + "/expected/" + c.stem + "." + c.mode.name;
  std::vector<std::string> keys(in.records.size());
  absl::Status failure;
  for (size_t i = 0; i < in.records.size() && failure.ok(); ++i) {
    failure = (*encoder)->AppendAndRewrite(in.records[i].get(), i, &keys[i]);
    if (failure.ok()) {
      EXPECT_LE(keys[i].size(), (*encoder)->max_key_bytes());
    }
  }
  if (fs::exists(expected_base + ".error")) {
    const std::vector<std::string> message = ReadLines(expected_base + ".error");
    ASSERT_FALSE(message.empty());
    ASSERT_TRUE(absl::StrContains(message[0], "no MC tag")) << message[0];
    EXPECT_EQ(failure.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(failure.message(), "MC")) << failure;
    EXPECT_TRUE(absl::StrContains(failure.message(), "fixmate")) << failure;
    return;
  }
  ASSERT_TRUE(failure.ok()) << failure;
  const std::string expected_path =
      fs::exists(expected_base + ".sam") ? expected_base + ".sam" : expected_base + ".sam.gz";
  const std::vector<std::string> expected = ReadLines(expected_path);
  ASSERT_FALSE(expected.empty()) << expected_path;

  // Header.
  const bool placed = std::any_of(in.records.begin(), in.records.end(),
                                  [](const BamPtr& b) { return b->core.tid >= 0; });
  HeaderPtr header(sam_hdr_dup(in.header.get()));
  ASSERT_TRUE(ApplySortOrder(*order, header.get(), placed).ok());
  const std::vector<std::string> header_lines =
      absl::StrSplit(absl::string_view(sam_hdr_str(header.get())), '\n', absl::SkipEmpty());
  EXPECT_EQ(HeaderWithoutPg(header_lines), HeaderWithoutPg(expected));

  // Records: a stable sort by key bytes.
  std::vector<size_t> order_of(in.records.size());
  std::iota(order_of.begin(), order_of.end(), 0);
  std::stable_sort(order_of.begin(), order_of.end(),
                   [&keys](size_t a, size_t b) { return keys[a] < keys[b]; });
  std::vector<std::string> expected_records;
  for (const std::string& l : expected) {
    if (l.empty() || l[0] != '@') expected_records.push_back(l);
  }
  ASSERT_EQ(expected_records.size(), in.records.size());
  kstring_t text = KS_INITIALIZE;
  for (size_t i = 0; i < order_of.size(); ++i) {
    ASSERT_GE(sam_format1(in.header.get(), in.records[order_of[i]].get(), &text), 0);
    ASSERT_EQ(std::string(text.s, text.l), expected_records[i])
        << "output record " << i << " (input record " << order_of[i] << ")";
  }
  ks_free(&text);
}

std::string CaseName(const ::testing::TestParamInfo<GoldenCase>& info) {
  return info.param.stem + "_" + info.param.mode.name;
}

INSTANTIATE_TEST_SUITE_P(Oracle, GoldenTest, ::testing::ValuesIn(AllCases()), CaseName);
INSTANTIATE_TEST_SUITE_P(Minimiser, GoldenTest, ::testing::ValuesIn(MinimiserCases()), CaseName);

TEST(Golden, EveryInputHasAResultForEveryMode) {
  const std::vector<GoldenCase> cases = AllCases();
  EXPECT_EQ(cases.size(), 13u * 10u);
  for (const GoldenCase& c : cases) {
    const std::string base = kOracle + "/expected/" + c.stem + "." + c.mode.name;
    EXPECT_TRUE(fs::exists(base + ".sam") || fs::exists(base + ".sam.gz") ||
                fs::exists(base + ".error"))
        << base;
  }
  const std::vector<GoldenCase> minimiser = MinimiserCases();
  EXPECT_EQ(minimiser.size(), 3u * 8u);
  for (const GoldenCase& c : minimiser) {
    const std::string path = kMinimiserOracle + "/expected/" + c.stem + "." + c.mode.name;
    EXPECT_TRUE(fs::exists(path + ".sam.gz")) << path;
  }
}

}  // namespace
}  // namespace rocksort::keycodec
