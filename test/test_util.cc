#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "htslib/bgzf.h"
#include "htslib/sam.h"

namespace rocksort::test_util {

ScratchDir::ScratchDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/rocksort-test-XXXXXX");
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  path_ = buf.data();
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<std::string> ScratchDir::List() const {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(path_)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "can't read %s\n", path.c_str());
    std::abort();
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFileOrDie(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
  if (!out) {
    std::fprintf(stderr, "can't write %s\n", path.c_str());
    std::abort();
  }
}

CommandResult RunCommand(const std::string& command) {
  ScratchDir dir;
  const std::string out = dir.File("stdout"), err = dir.File("stderr");
  const std::string full = absl::StrCat("(", command, ") >", out, " 2>", err, " </dev/null");
  const int status = std::system(full.c_str());
  CommandResult result;
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  result.stdout_text = ReadFileOrDie(out);
  result.stderr_text = ReadFileOrDie(err);
  return result;
}

std::string NoReferenceLookupEnv(const ScratchDir& dir) {
  return absl::StrCat("REF_PATH=", dir.File("none/%s"), " REF_CACHE=", dir.File("none/%s"), " ");
}

absl::StatusOr<AlignmentFile> ReadAlignmentFile(const std::string& path) {
  samFile* in = sam_open(path.c_str(), "r");
  if (in == nullptr) return absl::NotFoundError(absl::StrCat("can't open ", path));
  sam_hdr_t* header = sam_hdr_read(in);
  if (header == nullptr) {
    sam_close(in);
    return absl::DataLossError(absl::StrCat("can't read header of ", path));
  }
  AlignmentFile file;
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(sam_hdr_str(header), '\n', absl::SkipEmpty())) {
    if (!absl::StartsWith(line, "@PG\t")) lines.emplace_back(line);
  }
  file.header_without_pg = absl::StrJoin(lines, "\n");
  bam1_t* b = bam_init1();
  int r;
  while ((r = sam_read1(in, header, b)) >= 0) {
    const bam1_core_t& c = b->core;
    std::string rec = absl::StrCat(c.tid, ":", c.pos, ":", c.bin, ":", c.qual, ":", c.flag, ":",
                                   c.n_cigar, ":", c.l_qseq, ":", c.mtid, ":", c.mpos, ":", c.isize,
                                   ":", c.l_qname - c.l_extranul, "|");
    rec.append(reinterpret_cast<const char*>(b->data), c.l_qname - c.l_extranul);
    rec.append(reinterpret_cast<const char*>(b->data) + c.l_qname, b->l_data - c.l_qname);
    file.records.push_back(std::move(rec));
    file.names.push_back(bam_get_qname(b));
  }
  bam_destroy1(b);
  sam_hdr_destroy(header);
  const int close_status = sam_close(in);
  if (r < -1) return absl::DataLossError(absl::StrCat(path, ": read error ", r));
  if (close_status != 0) return absl::DataLossError(absl::StrCat(path, ": close error"));
  return file;
}

absl::StatusOr<std::string> ReadBamRecordBytes(const std::string& path) {
  BGZF* fp = bgzf_open(path.c_str(), "r");
  if (fp == nullptr) return absl::NotFoundError(absl::StrCat("can't open ", path));
  sam_hdr_t* header = bam_hdr_read(fp);
  if (header == nullptr) {
    bgzf_close(fp);
    return absl::DataLossError(absl::StrCat("can't read BAM header of ", path));
  }
  sam_hdr_destroy(header);
  std::string bytes;
  char buf[1 << 16];
  ssize_t n;
  while ((n = bgzf_read(fp, buf, sizeof(buf))) > 0) bytes.append(buf, static_cast<size_t>(n));
  bgzf_close(fp);
  if (n < 0) return absl::DataLossError(absl::StrCat(path, ": BGZF read error"));
  return bytes;
}

std::string CompareAlignmentFiles(const std::string& expected, const std::string& actual) {
  absl::StatusOr<AlignmentFile> e = ReadAlignmentFile(expected);
  if (!e.ok()) return std::string(e.status().message());
  absl::StatusOr<AlignmentFile> a = ReadAlignmentFile(actual);
  if (!a.ok()) return std::string(a.status().message());
  if (e->header_without_pg != a->header_without_pg) {
    return absl::StrCat("headers differ:\n--- expected\n", e->header_without_pg, "\n--- actual\n",
                        a->header_without_pg);
  }
  const size_t n = std::min(e->records.size(), a->records.size());
  for (size_t i = 0; i < n; ++i) {
    if (e->records[i] != a->records[i]) {
      return absl::StrCat("record ", i, " differs: expected read ", e->names[i], ", got ",
                          a->names[i]);
    }
  }
  if (e->records.size() != a->records.size()) {
    return absl::StrCat("expected ", e->records.size(), " records, got ", a->records.size());
  }
  return "";
}

std::string RocksortBinary() { return ROCKSORT_BINARY; }
std::string GenReadsBinary() { return GEN_READS_BINARY; }

std::string FastaForHeader(const std::string& header_text) {
  std::string fasta;
  uint64_t x = 0x9E3779B97F4A7C15ULL;
  for (absl::string_view line : absl::StrSplit(header_text, '\n')) {
    if (!absl::StartsWith(line, "@SQ")) continue;
    std::string name;
    int64_t length = 0;
    for (absl::string_view field : absl::StrSplit(line, '\t')) {
      if (absl::ConsumePrefix(&field, "SN:")) name = std::string(field);
      if (absl::ConsumePrefix(&field, "LN:") && !absl::SimpleAtoi(field, &length)) {
        std::fprintf(stderr, "FastaForHeader: bad LN in \"%s\"\n", std::string(line).c_str());
        std::abort();
      }
    }
    absl::StrAppend(&fasta, ">", name, "\n");
    for (int64_t i = 0; i < length; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      fasta.push_back("ACGT"[x % 4]);
      if (i % 60 == 59 || i == length - 1) fasta.push_back('\n');
    }
  }
  return fasta;
}

}  // namespace rocksort::test_util
