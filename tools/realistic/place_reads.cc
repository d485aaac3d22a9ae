// place_reads: turns an aligner's output on a small (bacterial) reference
// into a realistic, UNSORTED BAM on a human-sized GRCh38 header.
//
// Input: SAM/BAM/CRAM as `bwa mem` writes it (a file or stdin), with the
// records of a template consecutive: read 1 and its supplementary records,
// then read 2 and its. Output: BAM (htslib's default compression level) with
//   * @HD VN:1.6 SO:unsorted GO:query, the 25 GRCh38 primary contigs
//     chr1..chr22, chrX, chrY, chrM with their real lengths, the input's @RG
//     and @PG lines and an @PG line of our own;
//   * every template moved to a random place: each input contig the template
//     touches gets one translation (a new contig, drawn by length, and an
//     offset), the same for all of the template's records on it, so TLEN,
//     mate positions and their distances stay exactly as the aligner wrote
//     them. The mate fields, the bin and the positions inside SA:Z and XA:Z
//     go through the same per-template mapping (XA/SA entries on input
//     contigs that no record of the template sits on get a translation of
//     their own; translated entries are clamped into their contig);
//   * unique Illumina-style names, A00001:101:H66990DSXY:LANE:TILE:X:Y, whose
//     (lane, tile, y, x) strictly increase from template to template;
//   * about --unmapped-frac of the templates as unmapped pairs (flags 77/141,
//     no position, CIGAR or mate fields, only AS:i:0 XS:i:0 RG:Z as bwa writes
//     them). The aligner's own unmapped pairs count towards the fraction;
//     each other pair is made unmapped with a probability that follows the
//     running shortfall (kUnmappedControlWindow), so the overall fraction is
//     the target unless the aligner's own fraction is higher.
//
// Determinism: the output is a pure function of the input records, --seed,
// --unmapped-frac and the htslib/libdeflate build. It does not depend on -@
// (BGZF block boundaries do not depend on the thread count) nor on any path:
// the @PG CL lists only the options that change the records. Random numbers
// come from SplitMix64 streams, not from <random>'s distributions, whose
// output differs between standard library versions.
//
// Like tools/gen_reads.cc, this is a single file that links only htslib and
// abseil, so that it builds whatever state the rocksort libraries are in.

#include <getopt.h>
#include <htslib/hts.h>
#include <htslib/sam.h>
#include <htslib/thread_pool.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rocksort {
namespace {

constexpr char kProgramName[] = "place_reads";
constexpr char kVersion[] = "1";

#define PLACE_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status place_status_ = (expr);         \
    if (!place_status_.ok()) return place_status_; \
  } while (0)

// GRCh38 primary assembly: chr1..chr22, chrX, chrY, chrM (as kHumanLengths in
// tools/gen_reads.cc).
constexpr int kNumHumanContigs = 25;
constexpr int64_t kHumanLengths[kNumHumanContigs] = {
    248956422, 242193529, 198295559, 190214555, 181538259, 170805979, 159345973,
    145138636, 138394717, 133797422, 135086622, 133275309, 114364328, 107043718,
    101991189, 90338345,  83257441,  80373285,  58617616,  64444167,  46709983,
    50818468,  156040895, 57227415,  16569};
constexpr const char* kHumanNames[kNumHumanContigs] = {
    "chr1",  "chr2",  "chr3",  "chr4",  "chr5",  "chr6",  "chr7",  "chr8",  "chr9",
    "chr10", "chr11", "chr12", "chr13", "chr14", "chr15", "chr16", "chr17", "chr18",
    "chr19", "chr20", "chr21", "chr22", "chrX",  "chrY",  "chrM"};

// A template whose records cannot be placed after this many draws spans more
// than any contig can hold (never the case for bacterial inputs: the longest
// bacterial chromosome is far shorter than chr21).
constexpr int kMaxPlacementDraws = 10000;

// --unmapped-frac controller: the chance to make a template unmapped is the
// target fraction plus the current shortfall (in templates) divided by this
// many templates, so the running fraction follows the target closely while
// the choice of templates stays random.
constexpr double kUnmappedControlWindow = 1000.0;

// Read names: A00001:101:H66990DSXY:LANE:TILE:X:Y, as a NovaSeq writes them.
// Clusters are visited row by row: x grows by 1..kMaxXStep, then y by
// 1..kMaxYStep for the next row; a tile ends past kMaxY, a lane after
// kTilesPerLane tiles (tiles 1101..1178, 1201..1278, 2101..2178, 2201..2278).
// (lane, tile, y, x) therefore strictly increases and never repeats.
constexpr char kNamePrefix[] = "A00001:101:H66990DSXY";
constexpr int kMaxX = 32000;
constexpr int kMaxXStep = 1600;
constexpr int kFirstY = 1000;
constexpr int kMaxY = 37000;
constexpr int kMaxYStep = 40;
constexpr int kTilesPerSwath = 78;

// ---------------------------------------------------------------------------
// Random numbers.

// SplitMix64: tiny, fast and fully specified.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) by multiply-shift (bias < n / 2^64). REQUIRES: n > 0.
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// Independent streams, so that (for example) the names do not change when
// the placement draws a different number of times. DO NOT CHANGE: the values
// are part of what makes a cached benchmark input reproducible.
enum RngStream : uint64_t {
  kStreamPlacement = 1,
  kStreamUnmapped = 2,
  kStreamNames = 3,
};

uint64_t StreamSeed(uint64_t seed, RngStream stream) {
  Rng mixer(seed ^ (stream * 0xd1b54a32d192ed03ULL));
  return mixer.Next();
}

// ---------------------------------------------------------------------------
// htslib handles.

struct HtsFileCloser {
  void operator()(htsFile* f) const { (void)hts_close(f); }
};
struct HeaderDestroyer {
  void operator()(sam_hdr_t* h) const { sam_hdr_destroy(h); }
};
struct RecordDestroyer {
  void operator()(bam1_t* b) const { bam_destroy1(b); }
};
struct ThreadPoolDestroyer {
  void operator()(hts_tpool* p) const { hts_tpool_destroy(p); }
};
using HtsFilePtr = std::unique_ptr<htsFile, HtsFileCloser>;
using HeaderPtr = std::unique_ptr<sam_hdr_t, HeaderDestroyer>;
using RecordPtr = std::unique_ptr<bam1_t, RecordDestroyer>;
using ThreadPoolPtr = std::unique_ptr<hts_tpool, ThreadPoolDestroyer>;

RecordPtr NewRecord() { return RecordPtr(bam_init1()); }

// ---------------------------------------------------------------------------
// Options.

struct Options {
  std::string input = "-";
  std::string output = "-";
  int threads = 0;
  uint64_t seed = 1;
  double unmapped_frac = 0.015;
};

void PrintUsage(FILE* out) {
  const Options d;
  absl::FPrintF(out,
                "Usage: %s [options] [IN.sam|IN.bam|-]\n"
                "\n"
                "Places the templates of an aligner's output (records of a template\n"
                "consecutive, as bwa mem writes them) at random positions of a GRCh38\n"
                "header, renames them Illumina-style and writes an unsorted BAM.\n"
                "The output depends only on the input, --seed and --unmapped-frac.\n"
                "\n"
                "Input/output:\n"
                "  IN                    input SAM/BAM/CRAM, '-' for stdin [%s]\n"
                "  -o FILE               output BAM, '-' for stdout [%s]\n"
                "  -@, --threads INT     extra htslib threads for decoding and\n"
                "                        compression [%d]\n"
                "\n"
                "Content:\n"
                "      --seed INT        random seed [%d]\n"
                "      --unmapped-frac F fraction of templates that end up as unmapped\n"
                "                        pairs, the aligner's own included [%g]\n"
                "\n"
                "  -h, --help            print this help and exit\n",
                kProgramName, d.input, d.output, d.threads, d.seed, d.unmapped_frac);
}

enum class ParseResult { kRun, kHelp, kMisuse };

ParseResult ParseOptions(int argc, char** argv, Options* opts, std::string* error) {
  enum { kOptSeed = 1000, kOptUnmappedFrac };
  static const struct option kLong[] = {
      {"threads", required_argument, nullptr, '@'},
      {"seed", required_argument, nullptr, kOptSeed},
      {"unmapped-frac", required_argument, nullptr, kOptUnmappedFrac},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0}};
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":o:@:h", kLong, nullptr)) != -1) {
    const char* arg = optarg;
    switch (c) {
      case 'o':
        opts->output = arg;
        break;
      case '@': {
        const char* end = arg + std::strlen(arg);
        auto [ptr, ec] = std::from_chars(arg, end, opts->threads);
        if (ptr == arg || ptr != end || ec != std::errc() || opts->threads < 0 ||
            opts->threads > 1024) {
          *error = absl::StrCat("-@: expected an integer in 0..1024, got \"", arg, "\"");
          return ParseResult::kMisuse;
        }
        break;
      }
      case kOptSeed: {
        const char* end = arg + std::strlen(arg);
        auto [ptr, ec] = std::from_chars(arg, end, opts->seed);
        if (ptr == arg || ptr != end || ec != std::errc()) {
          *error =
              absl::StrCat("--seed: expected a non-negative 64-bit integer, got \"", arg, "\"");
          return ParseResult::kMisuse;
        }
        break;
      }
      case kOptUnmappedFrac: {
        char* end = nullptr;
        errno = 0;
        const double f = std::strtod(arg, &end);
        if (end == arg || *end != '\0' || errno != 0 || !(f >= 0.0) || !(f <= 1.0)) {
          *error = absl::StrCat("--unmapped-frac: expected a number in 0..1, got \"", arg, "\"");
          return ParseResult::kMisuse;
        }
        opts->unmapped_frac = f;
        break;
      }
      case 'h':
        return ParseResult::kHelp;
      case ':':
        *error = absl::StrCat("option ", argv[optind - 1], " needs a value");
        return ParseResult::kMisuse;
      default:
        *error = absl::StrCat("unknown option ", argv[optind - 1]);
        return ParseResult::kMisuse;
    }
  }
  if (argc - optind > 1) {
    *error = "at most one input file";
    return ParseResult::kMisuse;
  }
  if (argc - optind == 1) opts->input = argv[optind];
  return ParseResult::kRun;
}

// ---------------------------------------------------------------------------
// The GRCh38 primary contigs as a target for random placement.

class HumanGenome {
 public:
  HumanGenome() {
    int64_t total = 0;
    for (int i = 0; i < kNumHumanContigs; ++i) {
      starts_[i] = total;
      total += kHumanLengths[i];
    }
    total_ = total;
  }

  static int64_t Length(int tid) { return kHumanLengths[tid]; }

  // Draws a contig (weighted by length) and a 0-based start on it such that
  // [start, start + span) fits, drawing again while it does not. Contigs with
  // avoid[tid] set are drawn again too, unless all of them are set.
  // Returns false if no fitting place was found in kMaxPlacementDraws draws.
  bool Place(Rng& rng, int64_t span, const bool* avoid, int* tid, int64_t* start) const {
    const bool all_avoided = std::all_of(avoid, avoid + kNumHumanContigs, [](bool b) { return b; });
    for (int draw = 0; draw < kMaxPlacementDraws; ++draw) {
      const int64_t g = static_cast<int64_t>(rng.Below(total_));
      const int t =
          static_cast<int>(std::upper_bound(starts_, starts_ + kNumHumanContigs, g) - starts_ - 1);
      const int64_t p = g - starts_[t];
      if (p + span > kHumanLengths[t]) continue;  // would run off the end
      if (avoid[t] && !all_avoided) continue;
      *tid = t;
      *start = p;
      return true;
    }
    return false;
  }

 private:
  int64_t starts_[kNumHumanContigs];
  int64_t total_;
};

// ---------------------------------------------------------------------------
// Illumina-style read names.

class IlluminaNamer {
 public:
  explicit IlluminaNamer(uint64_t seed) : rng_(seed) {}

  // The next name; strictly greater in (lane, tile, y, x) than the last.
  const std::string& Next() {
    if (first_) {
      first_ = false;
      x_ = 1 + static_cast<int>(rng_.Below(kMaxXStep));
    } else {
      x_ += 1 + static_cast<int>(rng_.Below(kMaxXStep));
      if (x_ > kMaxX) {
        x_ = 1 + static_cast<int>(rng_.Below(kMaxXStep));
        y_ += 1 + static_cast<int>(rng_.Below(kMaxYStep));
        if (y_ > kMaxY) {
          y_ = kFirstY;
          if (++tile_index_ == 4 * kTilesPerSwath) {
            tile_index_ = 0;
            ++lane_;
          }
        }
      }
    }
    // Tiles: surface 1..2, swath 1..2, tile 01..78.
    const int surface = 1 + tile_index_ / (2 * kTilesPerSwath);
    const int swath = 1 + (tile_index_ / kTilesPerSwath) % 2;
    const int tile = surface * 1000 + swath * 100 + 1 + tile_index_ % kTilesPerSwath;
    name_ = absl::StrFormat("%s:%d:%d:%d:%d", kNamePrefix, lane_, tile, x_, y_);
    return name_;
  }

 private:
  Rng rng_;
  bool first_ = true;
  int lane_ = 1;
  int tile_index_ = 0;
  int x_ = 0;
  int y_ = kFirstY;
  std::string name_;
};

// ---------------------------------------------------------------------------
// Statistics, printed at the end.

struct Stats {
  uint64_t records_in = 0;
  uint64_t records_out = 0;
  uint64_t templates = 0;
  uint64_t paired_templates = 0;
  uint64_t aligner_unmapped_pairs = 0;
  uint64_t made_unmapped_pairs = 0;
  uint64_t one_mate_unmapped = 0;  // templates
  uint64_t multi_contig = 0;       // templates on >1 input contig
  uint64_t supplementary = 0;      // records written
  uint64_t secondary = 0;          // records written
  uint64_t templates_with_xa = 0;
  uint64_t templates_with_sa = 0;
  uint64_t records_with_xa = 0;
  uint64_t records_with_sa = 0;
  uint64_t bytes_uncompressed = 0;  // sum of the records' BAM encodings
};

// ---------------------------------------------------------------------------
// The placer.

// Reference length of a CIGAR given as text ("97S53M"); 0 if it has none.
int64_t CigarTextRefLength(std::string_view cigar) {
  int64_t total = 0;
  int64_t n = 0;
  for (char c : cigar) {
    if (c >= '0' && c <= '9') {
      n = n * 10 + (c - '0');
      continue;
    }
    if (c == 'M' || c == 'D' || c == 'N' || c == '=' || c == 'X') total += n;
    n = 0;
  }
  return total;
}

// The complement of each 4-bit BAM base code, as a letter (seq_nt16_str is
// "=ACMGRSVTWYHKDBN").
constexpr char kComplementOfNt16[] = "=TGKCYSBAWRDMHVN";

// Splits `text` at `sep` into *out (empty pieces included).
void Split(std::string_view text, char sep, std::vector<std::string_view>* out) {
  out->clear();
  for (;;) {
    const size_t at = text.find(sep);
    out->push_back(text.substr(0, at));
    if (at == std::string_view::npos) return;
    text.remove_prefix(at + 1);
  }
}

bool ParseInt64(std::string_view text, int64_t* out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// Reads templates from `in`, places and renames them, writes them to `out`.
// Not thread-safe; one instance per run.
class Placer {
 public:
  Placer(const Options& opts, htsFile* in, sam_hdr_t* in_hdr, htsFile* out, sam_hdr_t* out_hdr)
      : opts_(opts),
        in_(in),
        in_hdr_(in_hdr),
        out_(out),
        out_hdr_(out_hdr),
        placement_rng_(StreamSeed(opts.seed, kStreamPlacement)),
        unmapped_rng_(StreamSeed(opts.seed, kStreamUnmapped)),
        namer_(StreamSeed(opts.seed, kStreamNames)),
        n_in_contigs_(sam_hdr_nref(in_hdr)),
        map_(n_in_contigs_),
        span_(n_in_contigs_) {
    made_[0] = NewRecord();
    made_[1] = NewRecord();
  }

  // Processes the whole input. On failure the message names the file and
  // the record (1-based input record number) or template.
  absl::Status Run() {
    size_t n = 0;        // records of the current template in pool_[0..n)
    uint64_t first = 0;  // input records before the current template
    for (;;) {
      if (pool_.size() == n) pool_.push_back(NewRecord());
      const int r = sam_read1(in_, in_hdr_, pool_[n].get());
      if (r < -1) {
        return absl::DataLossError(
            absl::StrFormat("%s: record %d: cannot parse (truncated or corrupt input)", opts_.input,
                            stats_.records_in + 1));
      }
      if (r == -1) break;
      ++stats_.records_in;
      if (n > 0 && std::strcmp(bam_get_qname(pool_[0].get()), bam_get_qname(pool_[n].get())) != 0) {
        PLACE_RETURN_IF_ERROR(ProcessTemplate(n, first));
        std::swap(pool_[0], pool_[n]);
        first += n;
        n = 0;
      }
      ++n;
    }
    if (n > 0) PLACE_RETURN_IF_ERROR(ProcessTemplate(n, first));
    return absl::OkStatus();
  }

  const Stats& stats() const { return stats_; }

 private:
  struct Translation {
    uint64_t stamp = 0;  // valid for the template whose serial this is
    int tid = -1;        // output contig
    int64_t offset = 0;  // output pos = input pos + offset
  };
  struct Span {
    uint64_t stamp = 0;
    int64_t begin = 0;
    int64_t end = 0;
  };

  static int Segment(const bam1_t* b) { return (b->core.flag & BAM_FREAD2) ? 1 : 0; }
  static bool IsPrimary(const bam1_t* b) {
    return (b->core.flag & (BAM_FSECONDARY | BAM_FSUPPLEMENTARY)) == 0;
  }

  // Records pool_[0..n) form one template, preceded by `first` input
  // records. Validates, places and writes it.
  absl::Status ProcessTemplate(size_t n, uint64_t first) {
    ++serial_;
    first_record_number_ = first;
    const std::string qname = bam_get_qname(pool_[0].get());

    // Primary records per segment; a repeat means the name was reused or the
    // records of two templates are interleaved.
    int primary[2] = {-1, -1};
    bool paired = false;
    bool all_unmapped = true;
    bool any_unmapped = false;
    for (size_t i = 0; i < n; ++i) {
      const bam1_t* b = pool_[i].get();
      if (b->core.flag & BAM_FPAIRED) paired = true;
      if (b->core.flag & BAM_FUNMAP) {
        any_unmapped = true;
      } else {
        all_unmapped = false;
      }
      if (!IsPrimary(b)) continue;
      int& slot = primary[Segment(b)];
      if (slot >= 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: record %d (read \"%s\"): a second primary record for the "
                            "same read; the records of a template must be consecutive and "
                            "names unique (as bwa mem writes them)",
                            opts_.input, first_record_number_ + i + 1, qname));
      }
      slot = static_cast<int>(i);
    }
    if (paired && (primary[0] < 0 || primary[1] < 0)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: record %d (read \"%s\"): the mate's primary record is not next "
                          "to it; the records of a template must be consecutive (as bwa mem "
                          "writes them)",
                          opts_.input, first_record_number_ + 1, qname));
    }

    ++stats_.templates;
    if (paired) ++stats_.paired_templates;
    const std::string& name = namer_.Next();

    const bool aligner_unmapped = paired && all_unmapped;
    if (aligner_unmapped) ++stats_.aligner_unmapped_pairs;
    bool make_unmapped = false;
    if (paired && !aligner_unmapped && opts_.unmapped_frac > 0) {
      // Shortfall of unmapped pairs against the target, this template
      // included; see kUnmappedControlWindow.
      const double unmapped_so_far =
          static_cast<double>(stats_.aligner_unmapped_pairs + stats_.made_unmapped_pairs);
      const double shortfall =
          opts_.unmapped_frac * static_cast<double>(stats_.templates) - unmapped_so_far;
      const double p = opts_.unmapped_frac + shortfall / kUnmappedControlWindow;
      make_unmapped = unmapped_rng_.Uniform() < p;
    }
    if (make_unmapped) {
      ++stats_.made_unmapped_pairs;
      return WriteUnmappedPair(primary, name);
    }
    if (!aligner_unmapped && any_unmapped) ++stats_.one_mate_unmapped;

    PLACE_RETURN_IF_ERROR(PlaceTemplate(n));

    bool has_xa = false;
    bool has_sa = false;
    for (size_t i = 0; i < n; ++i) {
      bam1_t* b = pool_[i].get();
      if (bam_set_qname(b, name.c_str()) < 0) {
        return absl::ResourceExhaustedError(
            absl::StrFormat("%s: record %d (read \"%s\"): out of memory renaming it", opts_.input,
                            first_record_number_ + i + 1, qname));
      }
      PLACE_RETURN_IF_ERROR(RewriteTag(b, "SA", i, qname, &has_sa));
      PLACE_RETURN_IF_ERROR(RewriteTag(b, "XA", i, qname, &has_xa));
      if (b->core.flag & BAM_FSUPPLEMENTARY) ++stats_.supplementary;
      if (b->core.flag & BAM_FSECONDARY) ++stats_.secondary;
      PLACE_RETURN_IF_ERROR(Write(b));
    }
    if (has_xa) ++stats_.templates_with_xa;
    if (has_sa) ++stats_.templates_with_sa;
    return absl::OkStatus();
  }

  // Chooses a translation for every input contig the records of pool_[0..n)
  // sit on (or point their mates to), and applies it to the core fields.
  absl::Status PlaceTemplate(size_t n) {
    // Spans per input contig, in order of first appearance.
    contigs_.clear();
    auto extend = [&](int tid, int64_t begin, int64_t end) {
      Span& s = span_[tid];
      if (s.stamp != serial_) {
        s.stamp = serial_;
        s.begin = begin;
        s.end = end;
        contigs_.push_back(tid);
      } else {
        s.begin = std::min(s.begin, begin);
        s.end = std::max(s.end, end);
      }
    };
    for (size_t i = 0; i < n; ++i) {
      const bam1_t* b = pool_[i].get();
      if (b->core.tid >= n_in_contigs_ || b->core.mtid >= n_in_contigs_) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: record %d (read \"%s\"): reference id out of range", opts_.input,
                            first_record_number_ + i + 1, bam_get_qname(b)));
      }
      if (b->core.tid >= 0 && b->core.pos >= 0) {
        extend(b->core.tid, b->core.pos, std::max(bam_endpos(b), b->core.pos + 1));
      }
      if (b->core.mtid >= 0 && b->core.mpos >= 0) {
        extend(b->core.mtid, b->core.mpos, b->core.mpos + 1);
      }
    }
    if (contigs_.size() > 1) ++stats_.multi_contig;
    bool used[kNumHumanContigs] = {};
    for (int tid : contigs_) {
      const Span& s = span_[tid];
      int new_tid = 0;
      int64_t start = 0;
      if (!genome_.Place(placement_rng_, s.end - s.begin, used, &new_tid, &start)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: record %d (read \"%s\"): the template spans %d bases of %s, "
                            "more than fits on a GRCh38 contig",
                            opts_.input, first_record_number_ + 1, bam_get_qname(pool_[0].get()),
                            s.end - s.begin, sam_hdr_tid2name(in_hdr_, tid)));
      }
      used[new_tid] = true;
      Translation& t = map_[tid];
      t.stamp = serial_;
      t.tid = new_tid;
      t.offset = start - s.begin;
    }
    for (size_t i = 0; i < n; ++i) {
      bam1_core_t& c = pool_[i]->core;
      if (c.tid >= 0) {
        const Translation& t = map_[c.tid];
        c.tid = t.tid;
        if (c.pos >= 0) c.pos += t.offset;
      }
      if (c.mtid >= 0) {
        const Translation& t = map_[c.mtid];
        c.mtid = t.tid;
        if (c.mpos >= 0) c.mpos += t.offset;
      }
      if (c.tid >= 0 && c.pos >= 0) {
        c.bin = hts_reg2bin(c.pos, bam_endpos(pool_[i].get()), 14, 5);
      }
    }
    return absl::OkStatus();
  }

  // The translation of input contig `tid` for this template; one is drawn
  // (so that [pos, pos + ref_length) lands on a random place) if no record
  // of the template sits there.
  absl::Status TranslationFor(int tid, int64_t pos, int64_t ref_length, const Translation** out) {
    Translation& t = map_[tid];
    if (t.stamp != serial_) {
      bool avoid[kNumHumanContigs] = {};
      int new_tid = 0;
      int64_t start = 0;
      if (!genome_.Place(placement_rng_, std::max<int64_t>(ref_length, 1), avoid, &new_tid,
                         &start)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("an alignment of %d bases does not fit on any "
                            "GRCh38 contig",
                            ref_length));
      }
      t.stamp = serial_;
      t.tid = new_tid;
      t.offset = start - pos;
    }
    *out = &t;
    return absl::OkStatus();
  }

  // Rewrites the contig names and positions of an SA:Z or XA:Z tag of
  // pool_[i] (already translated) through the template's mapping.
  //   SA:Z:rname,pos,strand,CIGAR,mapQ,NM;...
  //   XA:Z:rname,[+-]pos,CIGAR,NM;...
  absl::Status RewriteTag(bam1_t* b, const char tag[2], size_t i, const std::string& qname,
                          bool* seen) {
    const uint8_t* data = bam_aux_get(b, tag);
    if (data == nullptr) return absl::OkStatus();
    const bool is_sa = tag[0] == 'S';
    auto fail = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: record %d (read \"%s\"): %s tag: %s",
                                                        opts_.input, first_record_number_ + i + 1,
                                                        qname, tag, why));
    };
    if (*data != 'Z') return fail("not of type Z");
    *seen = true;
    if (is_sa) {
      ++stats_.records_with_sa;
    } else {
      ++stats_.records_with_xa;
    }
    const std::string_view value(reinterpret_cast<const char*>(data + 1));
    tag_out_.clear();
    Split(value, ';', &entries_);
    for (std::string_view entry : entries_) {
      if (entry.empty()) continue;
      const std::string entry_text(entry);
      Split(entry, ',', &fields_);
      if (fields_.size() != (is_sa ? 6u : 4u)) {
        return fail("malformed entry \"" + entry_text + "\"");
      }
      const std::string rname(fields_[0]);
      const int in_tid = sam_hdr_name2tid(in_hdr_, rname.c_str());
      if (in_tid < 0) return fail("unknown reference \"" + rname + "\"");
      std::string_view pos_text = fields_[1];
      char sign = 0;
      if (!is_sa) {
        if (pos_text.empty() || (pos_text[0] != '+' && pos_text[0] != '-')) {
          return fail("malformed entry \"" + entry_text + "\"");
        }
        sign = pos_text[0];
        pos_text.remove_prefix(1);
      }
      int64_t pos1 = 0;
      if (!ParseInt64(pos_text, &pos1) || pos1 < 1) {
        return fail("bad position in \"" + entry_text + "\"");
      }
      const std::string_view cigar = fields_[is_sa ? 3 : 2];
      const int64_t ref_length = CigarTextRefLength(cigar);
      const Translation* t = nullptr;
      absl::Status s = TranslationFor(in_tid, pos1 - 1, ref_length, &t);
      if (!s.ok()) return fail(std::string(s.message()));
      // Clamp so the alignment lies inside its new contig.
      const int64_t length = HumanGenome::Length(t->tid);
      const int64_t last_start = std::max<int64_t>(1, length - ref_length + 1);
      const int64_t new_pos1 = std::clamp<int64_t>(pos1 + t->offset, 1, last_start);
      tag_out_ += kHumanNames[t->tid];
      tag_out_ += ',';
      if (sign != 0) tag_out_ += sign;
      tag_out_ += std::to_string(new_pos1);
      for (size_t f = 2; f < fields_.size(); ++f) {
        tag_out_ += ',';
        tag_out_ += fields_[f];
      }
      tag_out_ += ';';
    }
    // bam_aux_update_str keeps the tag where it is.
    if (bam_aux_update_str(b, tag, static_cast<int>(tag_out_.size()), tag_out_.c_str()) < 0) {
      return fail("cannot update it (out of memory?)");
    }
    return absl::OkStatus();
  }

  // Writes read 1 and read 2 of the template as an unmapped pair, as bwa mem
  // writes one: flags 77/141, no position, CIGAR or mate, the sequence and
  // qualities as sequenced, AS:i:0 XS:i:0 and the read group.
  absl::Status WriteUnmappedPair(const int primary[2], const std::string& name) {
    for (int seg = 0; seg < 2; ++seg) {
      const bam1_t* src = pool_[primary[seg]].get();
      const int len = src->core.l_qseq;
      const bool reverse = (src->core.flag & BAM_FREVERSE) != 0;
      seq_.resize(len);
      qual_.resize(len);
      const uint8_t* s = bam_get_seq(src);
      const uint8_t* q = bam_get_qual(src);
      for (int k = 0; k < len; ++k) {
        const int from = reverse ? len - 1 - k : k;
        const int code = bam_seqi(s, from);
        seq_[k] = reverse ? kComplementOfNt16[code] : seq_nt16_str[code];
        qual_[k] = static_cast<char>(q[from]);
      }
      const uint8_t* rg = bam_aux_get(src, "RG");
      std::string rg_value;
      if (rg != nullptr && *rg == 'Z') rg_value = reinterpret_cast<const char*>(rg + 1);
      bam1_t* b = made_[seg].get();
      const uint16_t flag =
          BAM_FPAIRED | BAM_FUNMAP | BAM_FMUNMAP | (seg == 0 ? BAM_FREAD1 : BAM_FREAD2);
      const bool have_qual = len > 0 && q[0] != 0xff;
      if (bam_set1(b, name.size(), name.c_str(), flag, -1, -1, 0, 0, nullptr, -1, -1, 0, len,
                   seq_.data(), have_qual ? qual_.data() : nullptr, 16 + rg_value.size()) < 0) {
        return absl::ResourceExhaustedError(absl::StrFormat(
            "%s: record %d (read \"%s\"): cannot build the unmapped record", opts_.input,
            first_record_number_ + primary[seg] + 1, bam_get_qname(src)));
      }
      const uint8_t zero = 0;
      if (bam_aux_append(b, "AS", 'C', 1, &zero) < 0 ||
          bam_aux_append(b, "XS", 'C', 1, &zero) < 0 ||
          (rg != nullptr &&
           bam_aux_append(b, "RG", 'Z', static_cast<int>(rg_value.size() + 1),
                          reinterpret_cast<const uint8_t*>(rg_value.c_str())) < 0)) {
        return absl::ResourceExhaustedError(
            absl::StrFormat("%s: record %d (read \"%s\"): cannot add tags", opts_.input,
                            first_record_number_ + primary[seg] + 1, bam_get_qname(src)));
      }
      PLACE_RETURN_IF_ERROR(Write(b));
    }
    return absl::OkStatus();
  }

  absl::Status Write(const bam1_t* b) {
    errno = 0;
    if (sam_write1(out_, out_hdr_, b) < 0) {
      return absl::DataLossError(absl::StrFormat(
          "%s: cannot write record %d (read \"%s\"): %s", opts_.output, stats_.records_out + 1,
          bam_get_qname(b), errno != 0 ? std::strerror(errno) : "write error"));
    }
    ++stats_.records_out;
    // As in a BAM file: block_size (4 bytes) + 32-byte core + variable data
    // without the NULs htslib adds in memory to align the CIGAR.
    stats_.bytes_uncompressed += 4 + 32 + static_cast<uint64_t>(b->l_data - b->core.l_extranul);
    return absl::OkStatus();
  }

  const Options& opts_;
  htsFile* const in_;
  sam_hdr_t* const in_hdr_;
  htsFile* const out_;
  sam_hdr_t* const out_hdr_;
  Rng placement_rng_;
  Rng unmapped_rng_;
  IlluminaNamer namer_;
  HumanGenome genome_;
  const int n_in_contigs_;

  // Per template: mapping and spans by input contig, valid where their stamp
  // equals serial_ (so nothing needs clearing between templates).
  std::vector<Translation> map_;
  std::vector<Span> span_;
  std::vector<int> contigs_;
  uint64_t serial_ = 0;
  uint64_t first_record_number_ = 0;  // input records before the template

  std::vector<RecordPtr> pool_;  // records of the template (+ the next one)
  RecordPtr made_[2];            // scratch for unmapped pairs
  std::string seq_;
  std::string qual_;
  std::string tag_out_;
  std::vector<std::string_view> entries_;
  std::vector<std::string_view> fields_;
  Stats stats_;
};

// ---------------------------------------------------------------------------
// Header.

// The output header: @HD, the GRCh38 @SQ lines, the input's @RG and @PG
// lines in their order, and our @PG (chained to the input's last one).
absl::Status BuildHeader(const Options& opts, sam_hdr_t* in_hdr, HeaderPtr* out) {
  std::string text = "@HD\tVN:1.6\tSO:unsorted\tGO:query\n";
  for (int i = 0; i < kNumHumanContigs; ++i) {
    text += absl::StrFormat("@SQ\tSN:%s\tLN:%d\n", kHumanNames[i], kHumanLengths[i]);
  }
  const char* in_text = sam_hdr_str(in_hdr);
  std::vector<std::string_view> lines;
  Split(in_text != nullptr ? in_text : "", '\n', &lines);
  for (std::string_view line : lines) {
    if (line.substr(0, 4) == "@RG\t" || line.substr(0, 4) == "@PG\t") {
      text += line;
      text += '\n';
    }
  }
  HeaderPtr h(sam_hdr_parse(text.size(), text.c_str()));
  if (h == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: cannot build the output header from the input's @RG/@PG lines", opts.input));
  }
  // Only the options that change the records: paths and -@ do not.
  const std::string cl = absl::StrFormat("%s --seed %d --unmapped-frac %g", kProgramName, opts.seed,
                                         opts.unmapped_frac);
  if (sam_hdr_add_pg(h.get(), kProgramName, "PN", kProgramName, "VN", kVersion, "CL", cl.c_str(),
                     nullptr) < 0) {
    return absl::InternalError("cannot add the @PG line to the header");
  }
  *out = std::move(h);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------

// Sets *created once the output file exists (so that a failed run can
// remove it).
absl::Status Run(const Options& opts, Stats* stats, bool* created) {
  ThreadPoolPtr pool;
  htsThreadPool tp = {nullptr, 0};
  if (opts.threads > 0) {
    pool.reset(hts_tpool_init(opts.threads));
    if (pool == nullptr) {
      return absl::ResourceExhaustedError("cannot start the thread pool");
    }
    tp.pool = pool.get();
  }
  // Declared after the pool: the files must be closed before it is destroyed.
  HtsFilePtr in(sam_open(opts.input.c_str(), "r"));
  if (in == nullptr) {
    return absl::NotFoundError(
        absl::StrFormat("can't open \"%s\": %s", opts.input, std::strerror(errno)));
  }
  if (tp.pool != nullptr && hts_set_thread_pool(in.get(), &tp) < 0) {
    return absl::InternalError(absl::StrFormat("%s: cannot attach the thread pool", opts.input));
  }
  HeaderPtr in_hdr(sam_hdr_read(in.get()));
  if (in_hdr == nullptr) {
    return absl::DataLossError(absl::StrFormat("%s: cannot read the header", opts.input));
  }
  if (sam_hdr_nref(in_hdr.get()) == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: no @SQ lines in the header", opts.input));
  }
  HeaderPtr out_hdr;
  PLACE_RETURN_IF_ERROR(BuildHeader(opts, in_hdr.get(), &out_hdr));

  HtsFilePtr out(sam_open(opts.output.c_str(), "wb"));
  if (out == nullptr) {
    return absl::NotFoundError(
        absl::StrFormat("can't create \"%s\": %s", opts.output, std::strerror(errno)));
  }
  *created = opts.output != "-";
  if (tp.pool != nullptr && hts_set_thread_pool(out.get(), &tp) < 0) {
    return absl::InternalError(absl::StrFormat("%s: cannot attach the thread pool", opts.output));
  }
  if (sam_hdr_write(out.get(), out_hdr.get()) < 0) {
    return absl::DataLossError(absl::StrFormat("%s: cannot write the header", opts.output));
  }
  Placer placer(opts, in.get(), in_hdr.get(), out.get(), out_hdr.get());
  PLACE_RETURN_IF_ERROR(placer.Run());
  *stats = placer.stats();
  // A failed close is a failed run: the last blocks and the EOF marker are
  // written there.
  if (hts_close(out.release()) < 0) {
    return absl::DataLossError(absl::StrFormat("%s: error finishing the output: %s", opts.output,
                                               errno != 0 ? std::strerror(errno) : "write error"));
  }
  return absl::OkStatus();
}

double Percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

void PrintStats(const Stats& s, double seconds) {
  const uint64_t unmapped = s.aligner_unmapped_pairs + s.made_unmapped_pairs;
  absl::FPrintF(stderr,
                "%s: %d records (%d in), %d templates, %d bytes of BAM "
                "records uncompressed, in %.1f s\n",
                kProgramName, s.records_out, s.records_in, s.templates, s.bytes_uncompressed,
                seconds);
  absl::FPrintF(stderr,
                "%s: unmapped pairs %.3f%% of templates (%.3f%% from the aligner, "
                "%.3f%% made); one mate unmapped %.3f%%; on >1 input contig %.3f%%\n",
                kProgramName, Percent(unmapped, s.templates),
                Percent(s.aligner_unmapped_pairs, s.templates),
                Percent(s.made_unmapped_pairs, s.templates),
                Percent(s.one_mate_unmapped, s.templates), Percent(s.multi_contig, s.templates));
  absl::FPrintF(
      stderr,
      "%s: supplementary %.3f%% of records, secondary %.3f%%; XA on %.3f%% "
      "of records (%.3f%% of templates), SA on %.3f%% of records (%.3f%% of "
      "templates)\n",
      kProgramName, Percent(s.supplementary, s.records_out), Percent(s.secondary, s.records_out),
      Percent(s.records_with_xa, s.records_out), Percent(s.templates_with_xa, s.templates),
      Percent(s.records_with_sa, s.records_out), Percent(s.templates_with_sa, s.templates));
}

int Main(int argc, char** argv) {
  Options opts;
  std::string error;
  switch (ParseOptions(argc, argv, &opts, &error)) {
    case ParseResult::kHelp:
      PrintUsage(stdout);
      return std::fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
    case ParseResult::kMisuse:
      absl::FPrintF(stderr, "%s: %s\n\n", kProgramName, error);
      PrintUsage(stderr);
      return EXIT_FAILURE;
    case ParseResult::kRun:
      break;
  }
  hts_set_log_level(HTS_LOG_WARNING);
  const auto start = std::chrono::steady_clock::now();
  Stats stats;
  bool created = false;
  const absl::Status s = Run(opts, &stats, &created);
  if (!s.ok()) {
    absl::FPrintF(stderr, "%s: %s\n", kProgramName, s.message());
    // A failed run leaves no partial output behind.
    if (created) std::remove(opts.output.c_str());
    return EXIT_FAILURE;
  }
  PrintStats(stats,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return EXIT_SUCCESS;
}

}  // namespace
}  // namespace rocksort

int main(int argc, char** argv) { return rocksort::Main(argc, argv); }
