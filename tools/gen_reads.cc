// gen_reads: writes a synthetic, UNSORTED (aligner-order) paired-end SAM/BAM
// file for testing and benchmarking rocksort against `samtools sort`.
//
// What the output looks like and why:
//   * A random reference genome is built in memory from the seed, so reads
//     that overlap share sequence, as real data does (this matters for how
//     well a coordinate-sorted output compresses).
//   * Reads copy the reference with ~1% substitutions (more at low base
//     quality) and rare 1-3 base indels; CIGAR, NM:i and MD:Z are derived
//     from the same simulation, so they are mutually consistent.
//   * Pairs are emitted in random genomic order, read 1 then read 2, each
//     followed by its supplementary/secondary records, as BWA-MEM does.
//   * --tie-frac and --edge-cases create the inputs a sorter most easily gets
//     wrong: exact coordinate ties (stability), unmapped reads, reads at the
//     first and last base, records over 64 KiB, CIGARs of more than 65,535
//     operations (BAM stores those in a CG:B,I tag) and huge aux fields.
//
// Determinism: the output is a pure function of the options (the seed
// included) and the htslib/libdeflate build. It does not depend on -@: for
// --target-bytes the compressed size is only sampled right after an explicit
// BGZF flush, at checkpoints that are themselves computed from earlier
// samples (see Generator::Run). Note that the @PG line carries the command
// line, so with --target-bytes a different output path or -@ changes the
// header size and can move the stopping point by a few pairs; the records
// themselves are the same up to that point.
//
// This tool is deliberately a single file that links only htslib; it does
// not use the rocksort libraries or abseil, hence the local Status class.

#include <getopt.h>
#include <htslib/bgzf.h>
#include <htslib/hts.h>
#include <htslib/sam.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rocksort {
namespace {

constexpr char kProgramName[] = "gen_reads";
constexpr char kVersion[] = "0.1";

// ---------------------------------------------------------------------------
// Simulation constants. Rates are per pair, per record or per base as named.

constexpr double kDiscordantFrac = 0.005;     // per pair: mates placed apart
constexpr double kSupplementaryFrac = 0.005;  // per mapped primary record
constexpr double kSecondaryFrac = 0.005;      // per mapped primary record
constexpr double kSoftClip3PrimeFrac = 0.04;  // adapter read-through
constexpr double kSoftClip5PrimeFrac = 0.01;
constexpr int kMinClipReadLength = 40;      // shorter reads are never clipped
constexpr int kMinChimericReadLength = 60;  // both parts need >= 15 bases
constexpr int kRecentReadSlots = 64;        // tie candidates for --tie-frac

// Per-base event thresholds, as fractions of 2^32 (each aligned base gets 32
// random bits). Mismatch rates (ReadSimulator) depend on the base quality so
// that errors cluster where an aligner would expect them.
constexpr uint32_t kInsertionThreshold = 858993;  // 0.0002
constexpr uint32_t kDeletionThreshold = 858993;   // 0.0002
constexpr uint32_t kIndelBand = kInsertionThreshold + kDeletionThreshold;

// Illumina-style binned base qualities; 37 dominates.
constexpr uint8_t kQualHigh = 37;
constexpr uint8_t kQualMid = 23;
constexpr uint8_t kQualLow = 12;
constexpr uint8_t kQualTail = 2;

// Read names are SIM:1:FC01:<lane>:<tile>:<x>:<y>. Each pair gets a serial
// number; lane, tile and y are derived from it so names never repeat (y
// grows by 4 per cluster inside a tile, and the random jitter is below 4).
constexpr uint64_t kClustersPerTile = 50000;
constexpr uint64_t kTilesPerLane = 96;  // 2 surfaces x 3 swaths x 16 tiles

// Edge cases (--edge-cases). Each kind is emitted kEdgeRepeats times, spread
// evenly through the file.
constexpr int kEdgeRepeats = 4;
constexpr int kLongReadLength = 70000;  // record > 64 KiB
constexpr int kManyOpsPairs = 40000;    // 1M1I x 40000 = 80000 CIGAR ops
constexpr int kHugeArrayElements = 100000;
constexpr int kHugeStringLength = 100000;
constexpr int kTieBurstSize = 50;
// The first reference must hold the long read and the many-op record.
constexpr int64_t kMinEdgeFirstRefLength = 100000;

constexpr int64_t kMinRefLength = 1000;
constexpr int64_t kMaxRefLength = std::numeric_limits<int32_t>::max() - 1;
constexpr uint64_t kMaxGenomeLength = 16ULL << 30;  // 4 GiB of packed bases
constexpr int kMaxReadLength = 100000;

// --target-bytes checkpoints: the first sample is taken after this many
// pairs; afterwards the step is half the estimated remaining pairs until the
// estimate drops below kHalvingLimit, then the whole estimate (at least
// kMinCheckpointStep). This needs ~20 flushes for 1 GiB and overshoots the
// target by a fraction of one small step.
constexpr uint64_t kFirstCheckpointPairs = 16;
constexpr uint64_t kHalvingLimit = 4096;
constexpr uint64_t kMinCheckpointStep = 16;

// GRCh38 primary chromosome lengths (chr1..chr22, chrX, chrY, chrM). Only
// the proportions are used; they are scaled to --genome-length.
constexpr int64_t kHumanLengths[] = {248956422, 242193529, 198295559, 190214555, 181538259,
                                     170805979, 159345973, 145138636, 138394717, 133797422,
                                     135086622, 133275309, 114364328, 107043718, 101991189,
                                     90338345,  83257441,  80373285,  58617616,  64444167,
                                     46709983,  50818468,  156040895, 57227415,  16569};
constexpr int kNumHumanLengths = sizeof(kHumanLengths) / sizeof(kHumanLengths[0]);

constexpr char kBases[] = "ACGT";
constexpr char kReadGroup[] = "SIM.1";

// ---------------------------------------------------------------------------
// Minimal error value: an empty message means success.

class [[nodiscard]] Status {
 public:
  static Status Ok() { return Status(); }
  static Status Error(std::string message) {
    Status s;
    s.message_ = std::move(message);
    return s;
  }
  bool ok() const { return message_.empty(); }
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

#define GEN_RETURN_IF_ERROR(expr)      \
  do {                                 \
    Status status_ = (expr);           \
    if (!status_.ok()) return status_; \
  } while (0)

// ---------------------------------------------------------------------------
// SplitMix64: tiny, fast and fully specified, so the output does not depend
// on the C++ library's distribution implementations. Streams for different
// purposes are seeded independently so that, for example, the sequence of
// ordinary pairs does not change when --edge-cases inserts extra records.

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) by multiply-shift; the bias (< n / 2^64) is irrelevant
  // here and the method needs no rejection loop.
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  bool Chance(double p) { return Uniform() < p; }

 private:
  uint64_t state_;
};

enum RngStream : uint64_t {
  kStreamReference = 1,
  kStreamPairs = 2,
  kStreamNames = 3,
  kStreamEdge = 4,
};

uint64_t StreamSeed(uint64_t seed, RngStream stream) {
  Rng mixer(seed ^ (stream * 0xd1b54a32d192ed03ULL));
  return mixer.Next();
}

// ---------------------------------------------------------------------------
// Options and their parsing.

struct Options {
  std::string output;
  int compression_level = -1;  // -1: htslib default
  int threads = 0;
  bool have_pairs = false;
  uint64_t pairs = 0;
  bool have_target = false;
  uint64_t target_bytes = 0;
  uint64_t seed = 1;
  int read_length = 150;
  int refs = 25;
  uint64_t genome_length = 100ULL << 20;
  double unmapped_frac = 0.02;
  double tie_frac = 0.05;
  bool edge_cases = false;
  std::string command_line;  // for @PG CL
};

void PrintUsage(FILE* out) {
  const Options d;
  std::fprintf(out,
               "Usage: %s -o FILE (-n INT | --target-bytes SIZE) [options]\n"
               "\n"
               "Writes synthetic paired-end alignments in aligner (unsorted) order.\n"
               "The output is deterministic for a given seed and set of options.\n"
               "\n"
               "Output:\n"
               "  -o FILE               output; format from the name: *.bam -> BAM,\n"
               "                        *.sam -> SAM, '-' -> SAM on stdout\n"
               "  -l INT                BAM compression level 0-9 [htslib default]\n"
               "  -@ INT                extra htslib threads for writing [%d]\n"
               "\n"
               "Amount (exactly one of):\n"
               "  -n INT                number of read pairs (edge-case records come\n"
               "                        on top)\n"
               "      --target-bytes SIZE\n"
               "                        emit pairs until the output holds SIZE bytes\n"
               "                        (compressed bytes for BAM)\n"
               "\n"
               "Content:\n"
               "      --seed INT        random seed [%" PRIu64
               "]\n"
               "      --read-length INT read length, 10-%d [%d]\n"
               "      --refs INT        number of @SQ references, sized like human\n"
               "                        chromosomes [%d]\n"
               "      --genome-length SIZE\n"
               "                        total reference length; each reference is at\n"
               "                        least %" PRId64 " bases [%" PRIu64
               "M]\n"
               "      --unmapped-frac F fraction of pairs with one unmapped mate; a\n"
               "                        further F/4 of pairs are fully unmapped [%g]\n"
               "      --tie-frac F      fraction of pairs whose read 1 reuses the\n"
               "                        position of a recent read [%g]\n"
               "      --edge-cases      also emit, %d times each, spread through the\n"
               "                        file: a %d-base read, a %d-op CIGAR, a\n"
               "                        %d-element B:i tag, a %d-char Z tag, reads\n"
               "                        at the first and last base, pairs on the last\n"
               "                        reference, unmapped reads and a burst of %d\n"
               "                        exact ties\n"
               "\n"
               "  -h, --help            print this help and exit\n"
               "\n"
               "SIZE is an integer with an optional K, M or G suffix (powers of 1024,\n"
               "as in samtools).\n",
               kProgramName, d.threads, d.seed, kMaxReadLength, d.read_length, d.refs,
               kMinRefLength, d.genome_length >> 20, d.unmapped_frac, d.tie_frac, kEdgeRepeats,
               kLongReadLength, 2 * kManyOpsPairs, kHugeArrayElements, kHugeStringLength,
               kTieBurstSize);
}

// Parses a non-negative decimal integer with nothing else around it.
Status ParseUint(std::string_view flag, const char* text, uint64_t max, uint64_t* out) {
  const char* end = text + std::strlen(text);
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text, end, value);
  if (ptr == text || ptr != end || ec != std::errc() || value > max) {
    return Status::Error(std::string(flag) + ": expected an integer in 0.." + std::to_string(max) +
                         ", got \"" + text + "\"");
  }
  *out = value;
  return Status::Ok();
}

Status ParseIntInRange(std::string_view flag, const char* text, int min, int max, int* out) {
  uint64_t value = 0;
  Status s = ParseUint(flag, text, static_cast<uint64_t>(max), &value);
  if (!s.ok() || value < static_cast<uint64_t>(min)) {
    return Status::Error(std::string(flag) + ": expected an integer in " + std::to_string(min) +
                         ".." + std::to_string(max) + ", got \"" + text + "\"");
  }
  *out = static_cast<int>(value);
  return Status::Ok();
}

// Integer with an optional K/M/G suffix (powers of 1024, like samtools -m).
Status ParseSize(std::string_view flag, const char* text, uint64_t* out) {
  const char* end = text + std::strlen(text);
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text, end, value);
  int shift = 0;
  if (ptr != text && ec == std::errc() && ptr + 1 == end) {
    switch (*ptr) {
      case 'k':
      case 'K':
        shift = 10;
        ++ptr;
        break;
      case 'm':
      case 'M':
        shift = 20;
        ++ptr;
        break;
      case 'g':
      case 'G':
        shift = 30;
        ++ptr;
        break;
      default:
        break;
    }
  }
  if (ptr == text || ptr != end || ec != std::errc() ||
      value > (std::numeric_limits<uint64_t>::max() >> shift)) {
    return Status::Error(std::string(flag) +
                         ": expected an integer with an optional K/M/G "
                         "suffix, got \"" +
                         text + "\"");
  }
  *out = value << shift;
  return Status::Ok();
}

Status ParseFraction(std::string_view flag, const char* text, double max, double* out) {
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || errno != 0 || !std::isfinite(value) || value < 0.0 ||
      value > max) {
    return Status::Error(std::string(flag) + ": expected a number in 0.." +
                         std::to_string(max).substr(0, 4) + ", got \"" + text + "\"");
  }
  *out = value;
  return Status::Ok();
}

enum LongOption : int {
  kOptTargetBytes = 256,
  kOptSeed,
  kOptReadLength,
  kOptRefs,
  kOptGenomeLength,
  kOptUnmappedFrac,
  kOptTieFrac,
  kOptEdgeCases,
};

enum class ParseResult { kRun, kHelp, kMisuse };

// On kMisuse, *error holds the message (empty for "no arguments at all").
ParseResult ParseOptions(int argc, char** argv, Options* opts, std::string* error) {
  static const struct option kLongOptions[] = {
      {"help", no_argument, nullptr, 'h'},
      {"target-bytes", required_argument, nullptr, kOptTargetBytes},
      {"seed", required_argument, nullptr, kOptSeed},
      {"read-length", required_argument, nullptr, kOptReadLength},
      {"refs", required_argument, nullptr, kOptRefs},
      {"genome-length", required_argument, nullptr, kOptGenomeLength},
      {"unmapped-frac", required_argument, nullptr, kOptUnmappedFrac},
      {"tie-frac", required_argument, nullptr, kOptTieFrac},
      {"edge-cases", no_argument, nullptr, kOptEdgeCases},
      {nullptr, 0, nullptr, 0}};

  for (int i = 0; i < argc; ++i) {
    if (i > 0) opts->command_line += ' ';
    opts->command_line += argv[i];
  }

  opterr = 0;  // we print our own messages
  int c;
  while ((c = getopt_long(argc, argv, ":o:n:l:@:h", kLongOptions, nullptr)) != -1) {
    Status s = Status::Ok();
    switch (c) {
      case 'o':
        opts->output = optarg;
        break;
      case 'n':
        s = ParseUint("-n", optarg, std::numeric_limits<int64_t>::max(), &opts->pairs);
        opts->have_pairs = true;
        break;
      case 'l':
        s = ParseIntInRange("-l", optarg, 0, 9, &opts->compression_level);
        break;
      case '@':
        s = ParseIntInRange("-@", optarg, 0, 1024, &opts->threads);
        break;
      case 'h':
        return ParseResult::kHelp;
      case kOptTargetBytes:
        s = ParseSize("--target-bytes", optarg, &opts->target_bytes);
        opts->have_target = true;
        break;
      case kOptSeed:
        s = ParseUint("--seed", optarg, std::numeric_limits<uint64_t>::max(), &opts->seed);
        break;
      case kOptReadLength:
        s = ParseIntInRange("--read-length", optarg, 10, kMaxReadLength, &opts->read_length);
        break;
      case kOptRefs:
        s = ParseIntInRange("--refs", optarg, 1, 1000000, &opts->refs);
        break;
      case kOptGenomeLength:
        s = ParseSize("--genome-length", optarg, &opts->genome_length);
        break;
      // One mate unmapped plus a quarter as many fully unmapped pairs must
      // fit in one pair's probability mass.
      case kOptUnmappedFrac:
        s = ParseFraction("--unmapped-frac", optarg, 0.8, &opts->unmapped_frac);
        break;
      case kOptTieFrac:
        s = ParseFraction("--tie-frac", optarg, 1.0, &opts->tie_frac);
        break;
      case kOptEdgeCases:
        opts->edge_cases = true;
        break;
      case ':':
        *error = std::string("option ") + argv[optind - 1] + " needs an argument";
        return ParseResult::kMisuse;
      default:
        *error = optopt > 0 && optopt < 128
                     ? std::string("unknown option -") + static_cast<char>(optopt)
                     : std::string("unknown option ") + argv[optind - 1];
        return ParseResult::kMisuse;
    }
    if (!s.ok()) {
      *error = s.message();
      return ParseResult::kMisuse;
    }
  }
  if (argc == 1) return ParseResult::kHelp;
  if (optind < argc) {
    *error = std::string("unexpected argument \"") + argv[optind] + "\"";
    return ParseResult::kMisuse;
  }
  if (opts->output.empty()) {
    *error = "-o FILE is required";
    return ParseResult::kMisuse;
  }
  if (opts->have_pairs == opts->have_target) {
    *error = "give exactly one of -n and --target-bytes";
    return ParseResult::kMisuse;
  }
  if (opts->have_target && opts->target_bytes == 0) {
    *error = "--target-bytes must be positive";
    return ParseResult::kMisuse;
  }
  if (opts->genome_length < static_cast<uint64_t>(kMinRefLength) ||
      opts->genome_length > kMaxGenomeLength) {
    *error = "--genome-length must be between " + std::to_string(kMinRefLength) + " and " +
             std::to_string(kMaxGenomeLength >> 30) + "G";
    return ParseResult::kMisuse;
  }
  return ParseResult::kRun;
}

// ---------------------------------------------------------------------------
// The random reference genome, 2 bits per base (100 Mbp take 25 MB).
// Thread-compatible; immutable after Build().

class Reference {
 public:
  Status Build(int n_refs, uint64_t genome_length, uint64_t seed) {
    std::vector<double> weights;
    for (int i = 0; i < n_refs; ++i) {
      if (i < kNumHumanLengths) {
        weights.push_back(static_cast<double>(kHumanLengths[i]));
        names_.push_back(i < 22    ? "chr" + std::to_string(i + 1)
                         : i == 22 ? "chrX"
                         : i == 23 ? "chrY"
                                   : "chrM");
      } else {
        // Beyond the primary assembly: small contigs, like the unplaced
        // scaffolds of GRCh38 (tens to hundreds of kilobases).
        weights.push_back(20000.0 +
                          static_cast<double>((static_cast<uint64_t>(i) * 104729) % 280000));
        names_.push_back("chrUn_sim" + std::to_string(i + 1));
      }
    }
    double total_weight = 0;
    for (double w : weights) total_weight += w;

    offsets_.push_back(0);
    for (int i = 0; i < n_refs; ++i) {
      const double scaled =
          std::round(static_cast<double>(genome_length) * weights[i] / total_weight);
      const int64_t length = std::max(kMinRefLength, static_cast<int64_t>(scaled));
      if (length > kMaxRefLength) {
        return Status::Error("--genome-length too large for --refs " + std::to_string(n_refs) +
                             ": " + names_[i] + " would exceed 2^31-2 bases");
      }
      lengths_.push_back(length);
      offsets_.push_back(offsets_.back() + static_cast<uint64_t>(length));
    }

    Rng rng(StreamSeed(seed, kStreamReference));
    packed_.resize((offsets_.back() + 31) / 32);
    for (uint64_t& word : packed_) word = rng.Next();
    return Status::Ok();
  }

  int size() const { return static_cast<int>(lengths_.size()); }
  const std::string& name(int tid) const { return names_[tid]; }
  int64_t length(int tid) const { return lengths_[tid]; }

  // REQUIRES: 0 <= pos < length(tid). Returns 0..3 for A, C, G, T.
  int Base(int tid, int64_t pos) const {
    const uint64_t g = offsets_[tid] + static_cast<uint64_t>(pos);
    return static_cast<int>((packed_[g >> 5] >> ((g & 31) * 2)) & 3);
  }

  // A locus drawn uniformly over the whole genome, so references receive
  // reads in proportion to their length.
  void RandomLocus(Rng& rng, int32_t* tid, int64_t* pos) const {
    const uint64_t g = rng.Below(offsets_.back());
    const auto it = std::upper_bound(offsets_.begin(), offsets_.end(), g);
    *tid = static_cast<int32_t>(it - offsets_.begin() - 1);
    *pos = static_cast<int64_t>(g - offsets_[*tid]);
  }

 private:
  std::vector<std::string> names_;
  std::vector<int64_t> lengths_;
  std::vector<uint64_t> offsets_;  // size() + 1 entries, genome coordinates
  std::vector<uint64_t> packed_;   // base g in bits 2*(g%32) of word g/32
};

// ---------------------------------------------------------------------------
// One alignment of one record, in SAM orientation (SEQ and QUAL run along
// the forward reference strand even for reverse-strand reads). Buffers are
// reused from record to record, so the hot loop does not allocate once they
// have grown to the largest record.

struct Alignment {
  int32_t tid = -1;
  int64_t pos = -1;
  bool reverse = false;
  uint8_t mapq = 0;
  std::vector<uint32_t> cigar;  // BAM encoding: len << 4 | op
  std::string seq;              // A/C/G/T letters
  std::string qual;             // raw Phred values (not +33)
  std::string md;
  int32_t nm = 0;
  int32_t score = 0;     // BWA-like: +1 match, -4 mismatch, -(6+len) gaps
  int64_t ref_span = 0;  // reference bases covered (M + D)
};

void PushCigar(std::vector<uint32_t>* cigar, int op, uint32_t len) {
  if (!cigar->empty() && static_cast<int>(bam_cigar_op(cigar->back())) == op) {
    cigar->back() += len << BAM_CIGAR_SHIFT;
  } else {
    cigar->push_back(bam_cigar_gen(len, op));
  }
}

void AppendNumber(std::string* out, int64_t value) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  (void)ec;  // 24 chars always suffice for an int64
  out->append(buf, end);
}

// CIGAR as SAM text. SA:Z wants soft clips where the record has hard clips.
void CigarToString(const std::vector<uint32_t>& cigar, bool hard_as_soft, std::string* out) {
  out->clear();
  for (uint32_t c : cigar) {
    AppendNumber(out, bam_cigar_oplen(c));
    int op = bam_cigar_op(c);
    if (hard_as_soft && op == BAM_CHARD_CLIP) op = BAM_CSOFT_CLIP;
    out->push_back(BAM_CIGAR_STR[op]);
  }
}

// Writes n random bases to out[0..n).
void RandomBases(Rng& rng, size_t n, char* out) {
  uint64_t bits = 0;
  for (size_t i = 0; i < n; ++i) {
    if ((i & 31) == 0) bits = rng.Next();
    out[i] = kBases[bits & 3];
    bits >>= 2;
  }
}

void AppendRandomBases(Rng& rng, size_t n, std::string* out) {
  const size_t old_size = out->size();
  out->resize(old_size + n);
  RandomBases(rng, n, out->data() + old_size);
}

// Hands out one 64-bit draw in pieces, for per-base decisions that need
// fewer bits than a whole draw.
class BitSource {
 public:
  explicit BitSource(Rng* rng) : rng_(rng) {}
  uint32_t Take32() {
    if (left32_ == 0) {
      bits32_ = rng_->Next();
      left32_ = 2;
    }
    --left32_;
    const uint32_t v = static_cast<uint32_t>(bits32_);
    bits32_ >>= 32;
    return v;
  }
  uint32_t Take16() {
    if (left16_ == 0) {
      bits16_ = rng_->Next();
      left16_ = 4;
    }
    --left16_;
    const uint32_t v = static_cast<uint32_t>(bits16_ & 0xffff);
    bits16_ >>= 16;
    return v;
  }

 private:
  Rng* rng_;  // not owned
  uint64_t bits32_ = 0;
  uint64_t bits16_ = 0;
  int left32_ = 0;
  int left16_ = 0;
};

// Produces base qualities and alignments. Not thread-safe (owns caches).
class ReadSimulator {
 public:
  explicit ReadSimulator(const Reference* ref) : ref_(ref) {
    // Mismatch probability by quality bin.
    SetMismatchRate(kQualHigh, 0.004);
    SetMismatchRate(kQualMid, 0.02);
    SetMismatchRate(kQualLow, 0.06);
    SetMismatchRate(kQualTail, 0.15);
  }

  // Fills *qual with `len` binned qualities in SAM orientation. In
  // sequencing order quality drops towards the 3' end, low values come in
  // runs, and some reads end in a Q2 tail (Illumina's "#" marking); a
  // reverse-strand read is stored reversed, so its 3' end is on the left.
  void MakeQualities(int len, bool reverse, Rng& rng, std::string* qual) {
    if (len != threshold_len_) ComputeLowThresholds(len);
    qual->resize(len);
    char* out = qual->data();
    int tail_start = len;
    if (len >= 20 && rng.Below(100) < 6) {
      tail_start = len - 1 - static_cast<int>(rng.Below(len / 5));
    }
    // This loop runs for every base of the output, so the common case (a
    // Q37 base) costs 16 random bits; rarer branches draw more.
    BitSource bits(&rng);
    uint8_t state = kQualHigh;
    for (int i = 0; i < len; ++i) {
      const uint32_t r16 = bits.Take16();
      uint8_t q = kQualHigh;
      if (i >= tail_start) {
        q = kQualTail;
      } else if (state != kQualHigh && (rng.Next() & 1) != 0) {
        q = state;  // low-quality runs continue with probability 1/2
      } else if (r16 < low_threshold_[i]) {
        const uint64_t pick = rng.Below(10);
        q = pick < 6 ? kQualMid : pick < 9 ? kQualLow : kQualTail;
      }
      state = q;
      out[reverse ? len - 1 - i : i] = static_cast<char>(q);
    }
  }

  // Simulates an alignment starting at reference position `pos` of `tid`:
  // `lead_clip` soft-clipped bases, up to `aligned` bases copied from the
  // reference with errors, then `trail_clip` soft-clipped bases. If the
  // reference ends first, the remaining query bases are soft-clipped too, so
  // the query length is always lead_clip + aligned + trail_clip. Clipped
  // bases are random. `qual` covers the whole query and drives the error
  // rate. Sets tid, pos, cigar, seq, md, nm, score and ref_span of *a; leaves
  // reverse, mapq and qual alone.
  // REQUIRES: 0 <= pos < ref length, aligned >= 1.
  void Align(int32_t tid, int64_t pos, int lead_clip, int aligned, int trail_clip, const char* qual,
             Rng& rng, Alignment* a) {
    a->tid = tid;
    a->pos = pos;
    a->cigar.clear();
    a->md.clear();
    a->nm = 0;
    int32_t score = 0;
    const int64_t ref_len = ref_->length(tid);
    const int query_len = lead_clip + aligned + trail_clip;
    a->seq.resize(query_len);
    char* seq = a->seq.data();

    if (lead_clip > 0) {
      RandomBases(rng, lead_clip, seq);
      PushCigar(&a->cigar, BAM_CSOFT_CLIP, lead_clip);
    }
    int q = lead_clip;  // query bases produced so far
    const int aligned_end = lead_clip + aligned;
    int64_t r = pos;
    int64_t match_run = 0;  // bases since the last MD event
    uint32_t m_run = 0;     // pending CIGAR M length, pushed on op change
    // An alignment never starts with an indel and never has two in a row.
    bool after_indel = true;
    BitSource bits(&rng);
    while (q < aligned_end && r < ref_len) {
      const uint32_t event = bits.Take32();
      if (event < kIndelBand) {
        // Indels need an aligned base after them, in query and reference.
        if (!after_indel && q + 1 < aligned_end && r + 1 < ref_len) {
          if (m_run > 0) PushCigar(&a->cigar, BAM_CMATCH, m_run);
          m_run = 0;
          const uint64_t aux = rng.Next();
          if (event < kInsertionThreshold) {
            const int len = std::min<int>(1 + aux % 3, aligned_end - q - 1);
            RandomBases(rng, len, seq + q);
            PushCigar(&a->cigar, BAM_CINS, len);
            a->nm += len;
            score -= 6 + len;
            q += len;
          } else {
            const int len = static_cast<int>(std::min<int64_t>(1 + aux % 3, ref_len - r - 1));
            AppendNumber(&a->md, match_run);
            match_run = 0;
            a->md.push_back('^');
            for (int j = 0; j < len; ++j) {
              a->md.push_back(kBases[ref_->Base(tid, r + j)]);
            }
            PushCigar(&a->cigar, BAM_CDEL, len);
            a->nm += len;
            score -= 6 + len;
            r += len;
          }
          after_indel = true;
          continue;
        }
      }
      const int ref_base = ref_->Base(tid, r);
      // Mismatches own the band of `event` just above the indel bands.
      const uint32_t mm = mismatch_threshold_[static_cast<uint8_t>(qual[q])];
      if (event >= kIndelBand && event - kIndelBand < mm) {
        seq[q] = kBases[(ref_base + 1 + rng.Below(3)) & 3];
        AppendNumber(&a->md, match_run);
        match_run = 0;
        a->md.push_back(kBases[ref_base]);
        ++a->nm;
        score -= 4;
      } else {
        seq[q] = kBases[ref_base];
        ++match_run;
        ++score;
      }
      ++m_run;
      ++q;
      ++r;
      after_indel = false;
    }
    if (m_run > 0) PushCigar(&a->cigar, BAM_CMATCH, m_run);
    AppendNumber(&a->md, match_run);
    if (q < query_len) {
      RandomBases(rng, query_len - q, seq + q);
      PushCigar(&a->cigar, BAM_CSOFT_CLIP, query_len - q);
    }
    a->score = std::max(score, 0);
    a->ref_span = r - pos;
  }

 private:
  void SetMismatchRate(uint8_t q, double p) {
    mismatch_threshold_[q] = static_cast<uint32_t>(p * 4294967296.0);
  }

  // P(start of a low-quality stretch at cycle i) = 1.5% + 15% * (i/len)^2,
  // in units of 2^-16.
  void ComputeLowThresholds(int len) {
    low_threshold_.resize(len);
    for (int i = 0; i < len; ++i) {
      const double frac = static_cast<double>(i) / len;
      low_threshold_[i] = static_cast<uint32_t>((0.015 + 0.15 * frac * frac) * 65536.0);
    }
    threshold_len_ = len;
  }

  const Reference* ref_;  // not owned
  uint32_t mismatch_threshold_[256] = {};
  std::vector<uint32_t> low_threshold_;
  int threshold_len_ = -1;
};

// ---------------------------------------------------------------------------
// Aux fields, encoded straight into BAM binary form. Integers use the
// smallest type that holds them, as htslib does when it parses SAM text.

class AuxBuilder {
 public:
  void Clear() { data_.clear(); }
  const uint8_t* data() const { return data_.data(); }
  size_t size() const { return data_.size(); }

  void AddInt(const char tag[2], int64_t v) {
    PutTag(tag);
    if (v >= 0) {
      if (v <= 0xff) {
        data_.push_back('C');
        PutLe(v, 1);
      } else if (v <= 0xffff) {
        data_.push_back('S');
        PutLe(v, 2);
      } else {
        data_.push_back('I');
        PutLe(v, 4);
      }
    } else {
      if (v >= -128) {
        data_.push_back('c');
        PutLe(v, 1);
      } else if (v >= -32768) {
        data_.push_back('s');
        PutLe(v, 2);
      } else {
        data_.push_back('i');
        PutLe(v, 4);
      }
    }
  }
  void AddString(const char tag[2], std::string_view s) {
    PutTag(tag);
    data_.push_back('Z');
    data_.insert(data_.end(), s.begin(), s.end());
    data_.push_back('\0');
  }
  void AddInt32Array(const char tag[2], const std::vector<int32_t>& values) {
    PutTag(tag);
    data_.push_back('B');
    data_.push_back('i');
    PutLe(static_cast<int64_t>(values.size()), 4);
    for (int32_t v : values) PutLe(v, 4);
  }

 private:
  void PutTag(const char tag[2]) {
    data_.push_back(static_cast<uint8_t>(tag[0]));
    data_.push_back(static_cast<uint8_t>(tag[1]));
  }
  // BAM is little-endian regardless of the host.
  void PutLe(int64_t v, int bytes) {
    const uint64_t u = static_cast<uint64_t>(v);
    for (int i = 0; i < bytes; ++i) {
      data_.push_back(static_cast<uint8_t>(u >> (8 * i)));
    }
  }

  std::vector<uint8_t> data_;
};

// ---------------------------------------------------------------------------
// Output: one samFile, one reusable bam1_t.

struct SamFileCloser {
  void operator()(samFile* f) const {
    if (f != nullptr) sam_close(f);
  }
};
struct HeaderFreer {
  void operator()(sam_hdr_t* h) const { sam_hdr_destroy(h); }
};
struct BamFreer {
  void operator()(bam1_t* b) const { bam_destroy1(b); }
};

// Everything that varies between the fields of one record except aux.
struct RecordFields {
  std::string_view name;
  uint16_t flag = 0;
  int32_t tid = -1;
  int64_t pos = -1;
  uint8_t mapq = 0;
  const std::vector<uint32_t>* cigar = nullptr;  // null: '*'
  int32_t mtid = -1;
  int64_t mpos = -1;
  int64_t tlen = 0;
  std::string_view seq;   // empty: '*'
  std::string_view qual;  // empty: '*'; else seq.size() raw Phred values
};

class Writer {
 public:
  Status Open(const Options& opts, sam_hdr_t* header) {
    name_ = opts.output;
    header_ = header;
    const std::string_view out = opts.output;
    auto ends_with = [&out](std::string_view suffix) {
      return out.size() > suffix.size() && out.substr(out.size() - suffix.size()) == suffix;
    };
    std::string mode;
    if (out == "-" || ends_with(".sam")) {
      mode = "w";
      is_bam_ = false;
      if (opts.compression_level >= 0) {
        std::fprintf(stderr, "%s: warning: -l is ignored for SAM output\n", kProgramName);
      }
    } else if (ends_with(".bam")) {
      mode = "wb";
      if (opts.compression_level >= 0) {
        mode += static_cast<char>('0' + opts.compression_level);
      }
      is_bam_ = true;
    } else {
      return Status::Error("can't tell the output format of \"" + opts.output +
                           "\": use a .bam or .sam name, or -");
    }
    fp_.reset(sam_open(opts.output.c_str(), mode.c_str()));
    if (!fp_) {
      return Status::Error("can't open \"" + opts.output + "\": " + std::strerror(errno));
    }
    if (opts.threads > 0 && hts_set_threads(fp_.get(), opts.threads) != 0) {
      return Status::Error("can't start " + std::to_string(opts.threads) +
                           " htslib threads for \"" + opts.output + "\"");
    }
    if (sam_hdr_write(fp_.get(), header_) < 0) {
      return Status::Error("\"" + opts.output + "\": can't write the header");
    }
    text_bytes_ = sam_hdr_length(header_);
    bam_.reset(bam_init1());
    if (!bam_) return Status::Error("out of memory");
    return Status::Ok();
  }

  Status Write(const RecordFields& f, const AuxBuilder& aux) {
    bam1_t* b = bam_.get();
    const size_t n_cigar = f.cigar != nullptr ? f.cigar->size() : 0;
    if (bam_set1(b, f.name.size(), f.name.data(), f.flag, f.tid, f.pos, f.mapq, n_cigar,
                 n_cigar ? f.cigar->data() : nullptr, f.mtid, f.mpos, f.tlen, f.seq.size(),
                 f.seq.empty() ? nullptr : f.seq.data(), f.qual.empty() ? nullptr : f.qual.data(),
                 aux.size()) < 0) {
      return Status::Error("\"" + name_ + "\": record " + std::to_string(records_ + 1) +
                           " (read \"" + std::string(f.name) +
                           "\"): can't build record: " + std::strerror(errno));
    }
    // bam_set1 reserved aux.size() bytes after the core fields.
    std::memcpy(b->data + b->l_data, aux.data(), aux.size());
    b->l_data += static_cast<int>(aux.size());
    const int ret = sam_write1(fp_.get(), header_, b);
    if (ret < 0) {
      return Status::Error("\"" + name_ + "\": record " + std::to_string(records_ + 1) +
                           " (read \"" + std::string(f.name) + "\"): write failed");
    }
    text_bytes_ += static_cast<uint64_t>(ret);  // SAM: the line incl. '\n'
    ++records_;
    return Status::Ok();
  }

  // Bytes of output so far: compressed bytes for BAM, text bytes for SAM.
  // For BAM this flushes the current BGZF block and waits for the
  // compression threads: with -@ the BGZF offset only advances on a flush,
  // and flushing at the same record on every run keeps the block layout,
  // and so the output, independent of the thread count.
  Status OutputBytes(uint64_t* bytes) {
    if (!is_bam_) {
      *bytes = text_bytes_;
      return Status::Ok();
    }
    if (bgzf_flush(fp_->fp.bgzf) != 0) {
      return Status::Error("\"" + name_ + "\": write failed");
    }
    *bytes = static_cast<uint64_t>(bgzf_tell(fp_->fp.bgzf) >> 16);
    return Status::Ok();
  }

  // A failed close means the file is incomplete: report it.
  Status Close() {
    bam_.reset();
    samFile* fp = fp_.release();
    if (fp != nullptr && sam_close(fp) != 0) {
      return Status::Error("\"" + name_ + "\": closing failed (disk full?)");
    }
    return Status::Ok();
  }

  uint64_t records() const { return records_; }

 private:
  std::string name_;
  sam_hdr_t* header_ = nullptr;  // not owned
  bool is_bam_ = false;
  uint64_t text_bytes_ = 0;
  uint64_t records_ = 0;
  std::unique_ptr<samFile, SamFileCloser> fp_;
  std::unique_ptr<bam1_t, BamFreer> bam_;
};

Status BuildHeader(const Options& opts, const Reference& ref,
                   std::unique_ptr<sam_hdr_t, HeaderFreer>* out) {
  std::string text = "@HD\tVN:1.6\tSO:unsorted\n";
  for (int i = 0; i < ref.size(); ++i) {
    text += "@SQ\tSN:" + ref.name(i) + "\tLN:" + std::to_string(ref.length(i)) + "\n";
  }
  text += std::string("@RG\tID:") + kReadGroup +
          "\tSM:sim_sample\tLB:sim_lib1\tPL:ILLUMINA\tPU:FC01.1\n";
  std::unique_ptr<sam_hdr_t, HeaderFreer> h(sam_hdr_init());
  if (!h || sam_hdr_add_lines(h.get(), text.data(), text.size()) != 0 ||
      sam_hdr_add_pg(h.get(), kProgramName, "VN", kVersion, "CL", opts.command_line.c_str(),
                     nullptr) != 0) {
    return Status::Error("can't build the SAM header");
  }
  *out = std::move(h);
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// The generator proper.

enum class PairKind { kProper, kDiscordant, kOneUnmapped, kBothUnmapped };

// How to place a pair. Negative fields mean "choose at random".
struct PairPlan {
  PairKind kind = PairKind::kProper;
  int32_t tid = -1;  // read 1's reference (kProper, kOneUnmapped)
  int64_t pos = -1;  // read 1's POS - 1 (kProper only)
  int reverse = -1;  // read 1's strand (kProper only)
};

enum class EdgeKind {
  kLongRead,
  kManyCigarOps,
  kHugeIntArray,
  kHugeString,
  kFirstBase,
  kLastBase,
  kLastReference,
  kMateUnmapped,
  kBothUnmapped,
  kTieBurst,
  kCount,  // not a kind
};
constexpr int kEdgeKinds = static_cast<int>(EdgeKind::kCount);
constexpr int kEdgeSlots = kEdgeKinds * kEdgeRepeats;

class Generator {
 public:
  Generator(const Options& opts, const Reference& ref)
      : opts_(opts),
        ref_(ref),
        sim_(&ref),
        pair_rng_(StreamSeed(opts.seed, kStreamPairs)),
        name_rng_(StreamSeed(opts.seed, kStreamNames)),
        edge_rng_(StreamSeed(opts.seed, kStreamEdge)) {
    fragment_mean_ = std::max(opts.read_length + 50.0, std::round(opts.read_length * 7.0 / 3.0));
    fragment_sd_ = fragment_mean_ / 7.0;
  }

  Status Run(sam_hdr_t* header) {
    GEN_RETURN_IF_ERROR(writer_.Open(opts_, header));
    if (opts_.have_pairs) {
      for (uint64_t i = 0; i < opts_.pairs; ++i) {
        GEN_RETURN_IF_ERROR(EmitDueEdgeCases(static_cast<double>(opts_.pairs)));
        GEN_RETURN_IF_ERROR(EmitPair(PlanPair(pair_rng_), pair_rng_));
        ++ordinary_pairs_;
      }
    } else {
      // The decision to stop (and where edge cases go) is only ever taken
      // from sizes measured at checkpoints, and the checkpoints depend only
      // on earlier measurements; see Writer::OutputBytes.
      double expected_pairs = std::numeric_limits<double>::infinity();
      uint64_t next_checkpoint = kFirstCheckpointPairs;
      for (;;) {
        if (ordinary_pairs_ >= next_checkpoint) {
          uint64_t bytes = 0;
          GEN_RETURN_IF_ERROR(writer_.OutputBytes(&bytes));
          if (bytes >= opts_.target_bytes) break;
          const double per_pair = static_cast<double>(bytes) / ordinary_pairs_;
          const uint64_t remaining = static_cast<uint64_t>(
              std::ceil(static_cast<double>(opts_.target_bytes - bytes) / per_pair));
          expected_pairs = static_cast<double>(ordinary_pairs_ + remaining);
          next_checkpoint =
              ordinary_pairs_ +
              (remaining > kHalvingLimit ? remaining / 2 : std::max(remaining, kMinCheckpointStep));
        }
        GEN_RETURN_IF_ERROR(EmitDueEdgeCases(expected_pairs));
        GEN_RETURN_IF_ERROR(EmitPair(PlanPair(pair_rng_), pair_rng_));
        ++ordinary_pairs_;
      }
    }
    // Whatever was not due yet (small outputs) goes at the end.
    GEN_RETURN_IF_ERROR(EmitDueEdgeCases(0.0));
    uint64_t bytes = 0;
    GEN_RETURN_IF_ERROR(writer_.OutputBytes(&bytes));
    records_ = writer_.records();
    GEN_RETURN_IF_ERROR(writer_.Close());
    bytes_ = bytes;
    return Status::Ok();
  }

  uint64_t pairs() const { return pairs_; }
  uint64_t records() const { return records_; }
  uint64_t edge_records() const { return edge_records_; }
  uint64_t bytes() const { return bytes_; }

 private:
  struct RecentRead {
    int32_t tid;
    int64_t pos;
    bool reverse;
  };

  PairPlan PlanPair(Rng& rng) {
    PairPlan plan;
    const double both_unmapped = opts_.unmapped_frac / 4;
    const double u = rng.Uniform();
    if (u < both_unmapped) {
      plan.kind = PairKind::kBothUnmapped;
    } else if (u < both_unmapped + opts_.unmapped_frac) {
      plan.kind = PairKind::kOneUnmapped;
    } else if (u < both_unmapped + opts_.unmapped_frac + kDiscordantFrac) {
      plan.kind = PairKind::kDiscordant;
    } else if (n_recent_ > 0 && rng.Chance(opts_.tie_frac)) {
      // Reuse a recent read 1's coordinate; keep its strand 3 times in 4 so
      // that (tid, pos, strand) ties, not just (tid, pos) ties, are common.
      const RecentRead& r = recent_[rng.Below(n_recent_)];
      plan.tid = r.tid;
      plan.pos = r.pos;
      plan.reverse = r.reverse != (rng.Below(4) == 0) ? 1 : 0;
    }
    return plan;
  }

  int64_t FragmentLength(Rng& rng) {
    // Irwin-Hall(4) is close enough to a normal and costs four draws.
    double sum = 0;
    for (int i = 0; i < 4; ++i) sum += rng.Uniform();
    const double z = (sum - 2.0) * std::sqrt(3.0);
    return std::max<int64_t>(opts_.read_length,
                             static_cast<int64_t>(std::llround(fragment_mean_ + fragment_sd_ * z)));
  }

  static int64_t Clamp(int64_t pos, int64_t ref_len) {
    return std::min(std::max<int64_t>(pos, 0), ref_len - 1);
  }

  static uint8_t DrawMapq(Rng& rng) {
    const uint64_t u = rng.Below(100);
    if (u < 90) return 60;
    if (u < 93) return 0;
    return static_cast<uint8_t>(1 + rng.Below(59));
  }

  // XS:i is the best other alignment's score: near AS when MAPQ is low.
  static int32_t SuboptimalScore(const Alignment& a, Rng& rng) {
    if (a.mapq == 0) return a.score;
    const int32_t ceiling = a.score * (60 - std::min<int>(a.mapq, 60)) / 60;
    return static_cast<int32_t>(rng.Below(static_cast<uint64_t>(std::max(ceiling, 0)) + 1 +
                                          static_cast<uint64_t>(a.score / 4)));
  }

  const std::string& NextName() {
    const uint64_t serial = name_serial_++;
    const uint64_t lane = 1 + serial / (kClustersPerTile * kTilesPerLane);
    const uint64_t in_lane = serial % (kClustersPerTile * kTilesPerLane);
    const uint64_t tile_index = in_lane / kClustersPerTile;
    const uint64_t cluster = in_lane % kClustersPerTile;
    const uint64_t tile =
        (1 + tile_index / 48) * 1000 + (1 + (tile_index / 16) % 3) * 100 + (1 + tile_index % 16);
    const uint64_t x = 1000 + name_rng_.Below(31000);
    const uint64_t y = 1000 + cluster * 4 + name_rng_.Below(4);
    char buf[96];
    const int n =
        std::snprintf(buf, sizeof(buf), "SIM:1:FC01:%" PRIu64 ":%" PRIu64 ":%" PRIu64 ":%" PRIu64,
                      lane, tile, x, y);
    name_.assign(buf, static_cast<size_t>(n));
    return name_;
  }

  // Simulates mate i's primary alignment (quality already in mates_[i].qual),
  // plus its supplementary and secondary alignments when drawn.
  void SimulateMapped(int i, int32_t tid, int64_t pos, bool reverse, Rng& rng) {
    const int rl = opts_.read_length;
    Alignment& a = mates_[i];
    a.reverse = reverse;
    a.mapq = DrawMapq(rng);
    has_sup_[i] = rl >= kMinChimericReadLength && rng.Chance(kSupplementaryFrac);
    has_sec_[i] = rng.Chance(kSecondaryFrac);
    if (has_sup_[i]) {
      // A chimeric read: one part aligns here (primary, soft-clipped), the
      // other elsewhere (supplementary, hard-clipped, BWA's default).
      Alignment& s = sups_[i];
      const int k = rl / 4 + static_cast<int>(rng.Below(rl / 2));
      int32_t tid2;
      int64_t pos2;
      ref_.RandomLocus(rng, &tid2, &pos2);
      s.reverse = reverse;
      s.mapq = DrawMapq(rng);
      if (rng.Below(2) == 0) {  // primary = left part
        sim_.Align(tid2, pos2, 0, rl - k, 0, a.qual.data() + k, rng, &s);
        sim_.Align(tid, pos, 0, k, rl - k, a.qual.data(), rng, &a);
        a.seq.replace(k, rl - k, s.seq);
        s.cigar.insert(s.cigar.begin(), bam_cigar_gen(k, BAM_CHARD_CLIP));
        s.qual.assign(a.qual, k, rl - k);
      } else {  // primary = right part
        sim_.Align(tid2, pos2, 0, k, 0, a.qual.data(), rng, &s);
        sim_.Align(tid, pos, k, rl - k, 0, a.qual.data(), rng, &a);
        a.seq.replace(0, k, s.seq);
        s.cigar.push_back(bam_cigar_gen(rl - k, BAM_CHARD_CLIP));
        s.qual.assign(a.qual, 0, k);
      }
    } else {
      int lead = 0, trail = 0;
      if (rl >= kMinClipReadLength) {
        const double u = rng.Uniform();
        const int len = 5 + static_cast<int>(rng.Below(std::min(26, rl / 4)));
        // SAM orientation: a forward read's 3' end is on the right.
        if (u < kSoftClip3PrimeFrac) {
          (reverse ? lead : trail) = len;
        } else if (u < kSoftClip3PrimeFrac + kSoftClip5PrimeFrac) {
          (reverse ? trail : lead) = len;
        }
      }
      sim_.Align(tid, pos, lead, rl - lead - trail, trail, a.qual.data(), rng, &a);
    }
    if (has_sec_[i]) {
      // Secondary hits are stored without SEQ/QUAL, like BWA does.
      Alignment& s = secs_[i];
      int32_t tid2;
      int64_t pos2;
      ref_.RandomLocus(rng, &tid2, &pos2);
      s.reverse = rng.Below(2) != 0;
      s.mapq = 0;
      sim_.Align(tid2, pos2, 0, rl, 0, a.qual.data(), rng, &s);
    }
  }

  static int64_t TemplateLength(const Alignment& self, const Alignment& mate, bool self_is_read1) {
    if (self.tid != mate.tid) return 0;
    const int64_t left = std::min(self.pos, mate.pos);
    const int64_t right = std::max(self.pos + self.ref_span, mate.pos + mate.ref_span);
    const bool plus = self.pos < mate.pos || (self.pos == mate.pos && self_is_read1);
    return plus ? right - left : left - right;
  }

  void AddAlignmentTags(const Alignment& a) {
    aux_.AddInt("NM", a.nm);
    aux_.AddString("MD", a.md);
  }

  void AddScoreTags(const Alignment& a, Rng& rng) {
    aux_.AddInt("AS", a.score);
    aux_.AddInt("XS", SuboptimalScore(a, rng));
  }

  void AppendSaEntry(const Alignment& a) {
    sa_ += ref_.name(a.tid);
    sa_ += ',';
    AppendNumber(&sa_, a.pos + 1);
    sa_ += a.reverse ? ",-," : ",+,";
    CigarToString(a.cigar, true, &cigar_text_);
    sa_ += cigar_text_;
    sa_ += ',';
    AppendNumber(&sa_, a.mapq);
    sa_ += ',';
    AppendNumber(&sa_, a.nm);
    sa_ += ';';
  }

  Status EmitPair(const PairPlan& plan, Rng& rng) {
    const int rl = opts_.read_length;
    bool mapped[2] = {true, true};
    if (plan.kind == PairKind::kBothUnmapped) {
      mapped[0] = mapped[1] = false;
    } else if (plan.kind == PairKind::kOneUnmapped) {
      mapped[rng.Below(2)] = false;
    }

    // Placement and strands.
    int32_t tid[2] = {-1, -1};
    int64_t pos[2] = {-1, -1};
    bool reverse[2] = {false, false};
    if (plan.kind == PairKind::kProper) {
      // FR orientation: the leftmost mate is on the forward strand.
      const int64_t insert = FragmentLength(rng) - rl;
      reverse[0] = plan.reverse >= 0 ? plan.reverse != 0 : rng.Below(2) != 0;
      reverse[1] = !reverse[0];
      if (plan.tid >= 0 && plan.pos >= 0) {
        tid[0] = tid[1] = plan.tid;
        pos[0] = plan.pos;
        pos[1] = reverse[0] ? pos[0] - insert : pos[0] + insert;
      } else {
        int64_t left;
        ref_.RandomLocus(rng, &tid[0], &left);
        if (plan.tid >= 0) {
          tid[0] = plan.tid;
          left = static_cast<int64_t>(rng.Below(ref_.length(tid[0])));
        }
        tid[1] = tid[0];
        left = std::min(left, std::max<int64_t>(0, ref_.length(tid[0]) - insert - rl));
        pos[reverse[0] ? 1 : 0] = left;
        pos[reverse[0] ? 0 : 1] = left + insert;
      }
      // Short references (or a tie anchor near an end) can push the mate
      // off the reference; keep both mates on it.
      pos[0] = Clamp(pos[0], ref_.length(tid[0]));
      pos[1] = Clamp(pos[1], ref_.length(tid[1]));
    } else {
      for (int i = 0; i < 2; ++i) {
        ref_.RandomLocus(rng, &tid[i], &pos[i]);
        reverse[i] = rng.Below(2) != 0;
      }
      if (plan.kind == PairKind::kOneUnmapped && plan.tid >= 0) {
        const int m = mapped[0] ? 0 : 1;
        tid[m] = plan.tid;
        pos[m] = static_cast<int64_t>(rng.Below(ref_.length(plan.tid)));
      }
    }

    for (int i = 0; i < 2; ++i) {
      Alignment& a = mates_[i];
      sim_.MakeQualities(rl, mapped[i] && reverse[i], rng, &a.qual);
      has_sup_[i] = has_sec_[i] = false;
      if (mapped[i]) {
        SimulateMapped(i, tid[i], pos[i], reverse[i], rng);
      } else {
        a.tid = -1;
        a.pos = -1;
        a.reverse = false;
        a.mapq = 0;
        a.cigar.clear();
        a.seq.clear();
        AppendRandomBases(rng, rl, &a.seq);  // unmappable: contamination
      }
    }

    // Coordinates as written: an unmapped mate sits at its mate's position.
    int32_t rec_tid[2];
    int64_t rec_pos[2];
    for (int i = 0; i < 2; ++i) {
      const int src = mapped[i] ? i : (mapped[1 - i] ? 1 - i : -1);
      rec_tid[i] = src >= 0 ? mates_[src].tid : -1;
      rec_pos[i] = src >= 0 ? mates_[src].pos : -1;
    }
    const bool proper = plan.kind == PairKind::kProper && mapped[0] && mapped[1];

    for (int i = 0; i < 2; ++i) {
      const int o = 1 - i;
      const Alignment& a = mates_[i];
      const Alignment& mate = mates_[o];
      const std::string& name = i == 0 ? NextName() : name_;

      uint16_t pair_flags = BAM_FPAIRED | (i == 0 ? BAM_FREAD1 : BAM_FREAD2);
      if (!mapped[o]) pair_flags |= BAM_FMUNMAP;
      if (mapped[o] && mate.reverse) pair_flags |= BAM_FMREVERSE;
      if (mapped[o]) CigarToString(mate.cigar, false, &mate_cigar_);

      RecordFields f;
      f.name = name;
      f.mtid = rec_tid[o];
      f.mpos = rec_pos[o];
      f.seq = a.seq;
      f.qual = a.qual;
      aux_.Clear();
      if (mapped[i]) {
        f.flag = pair_flags | (a.reverse ? BAM_FREVERSE : 0) | (proper ? BAM_FPROPER_PAIR : 0);
        f.tid = a.tid;
        f.pos = a.pos;
        f.mapq = a.mapq;
        f.cigar = &a.cigar;
        f.tlen = mapped[o] ? TemplateLength(a, mate, i == 0) : 0;
        AddAlignmentTags(a);
        if (mapped[o]) {
          aux_.AddString("MC", mate_cigar_);
          aux_.AddInt("MQ", mate.mapq);
        }
        AddScoreTags(a, rng);
        if (has_sup_[i]) {
          sa_.clear();
          AppendSaEntry(sups_[i]);
          aux_.AddString("SA", sa_);
        }
      } else {
        f.flag = pair_flags | BAM_FUNMAP;
        f.tid = rec_tid[i];
        f.pos = rec_pos[i];
        if (mapped[o]) {
          aux_.AddString("MC", mate_cigar_);
          aux_.AddInt("MQ", mate.mapq);
        }
        aux_.AddInt("AS", 0);
        aux_.AddInt("XS", 0);
      }
      aux_.AddString("RG", kReadGroup);
      GEN_RETURN_IF_ERROR(writer_.Write(f, aux_));

      // Extra records share the primary's pair fields, never 0x2 or TLEN.
      const Alignment* extras[2] = {has_sup_[i] ? &sups_[i] : nullptr,
                                    has_sec_[i] ? &secs_[i] : nullptr};
      for (int e = 0; e < 2; ++e) {
        const Alignment* x = extras[e];
        if (x == nullptr) continue;
        RecordFields g;
        g.name = name;
        g.flag = pair_flags | (x->reverse ? BAM_FREVERSE : 0) |
                 (e == 0 ? BAM_FSUPPLEMENTARY : BAM_FSECONDARY);
        g.tid = x->tid;
        g.pos = x->pos;
        g.mapq = x->mapq;
        g.cigar = &x->cigar;
        g.mtid = rec_tid[o];
        g.mpos = rec_pos[o];
        if (e == 0) {  // supplementary: SEQ/QUAL of its own part
          g.seq = x->seq;
          g.qual = x->qual;
        }
        aux_.Clear();
        AddAlignmentTags(*x);
        if (mapped[o]) {
          aux_.AddString("MC", mate_cigar_);
          aux_.AddInt("MQ", mate.mapq);
        }
        AddScoreTags(*x, rng);
        if (e == 0) {
          sa_.clear();
          AppendSaEntry(a);
          aux_.AddString("SA", sa_);
        }
        aux_.AddString("RG", kReadGroup);
        GEN_RETURN_IF_ERROR(writer_.Write(g, aux_));
      }
    }

    if (mapped[0]) {
      recent_[recent_next_] = {mates_[0].tid, mates_[0].pos, mates_[0].reverse};
      recent_next_ = (recent_next_ + 1) % kRecentReadSlots;
      n_recent_ = std::min(n_recent_ + 1, kRecentReadSlots);
    }
    ++pairs_;
    return Status::Ok();
  }

  // --- Edge cases -----------------------------------------------------------

  // Slot s is due once the pair count reaches (s + 0.5) / kEdgeSlots of the
  // expected total; kinds cycle, so every kind recurs in each quarter.
  Status EmitDueEdgeCases(double expected_pairs) {
    if (!opts_.edge_cases) return Status::Ok();
    const bool flush_all = expected_pairs <= 0.0;
    while (next_edge_slot_ < kEdgeSlots) {
      const double due = expected_pairs * (next_edge_slot_ + 0.5) / kEdgeSlots;
      if (!flush_all && static_cast<double>(ordinary_pairs_) < due) break;
      const int slot = next_edge_slot_++;
      const uint64_t before = writer_.records();
      GEN_RETURN_IF_ERROR(
          EmitEdgeCase(static_cast<EdgeKind>(slot % kEdgeKinds), slot / kEdgeKinds));
      edge_records_ += writer_.records() - before;
    }
    return Status::Ok();
  }

  Status EmitEdgeCase(EdgeKind kind, int repeat) {
    Rng& rng = edge_rng_;
    const int rl = opts_.read_length;
    const int32_t last = ref_.size() - 1;
    Alignment& a = single_;
    a.reverse = repeat % 2 != 0;
    a.mapq = 60;
    switch (kind) {
      case EdgeKind::kLongRead: {
        const int64_t pos = static_cast<int64_t>(rng.Below(ref_.length(0) - kLongReadLength));
        sim_.MakeQualities(kLongReadLength, a.reverse, rng, &a.qual);
        sim_.Align(0, pos, 0, kLongReadLength, 0, a.qual.data(), rng, &a);
        return WriteSingleEnd(a, kind, 1);
      }
      case EdgeKind::kManyCigarOps: {
        // 1M1I repeated: a valid alignment whose op count exceeds BAM's
        // 16-bit n_cigar_op, so htslib must store it in CG:B,I.
        const int64_t pos = static_cast<int64_t>(rng.Below(ref_.length(0) - kManyOpsPairs));
        a.tid = 0;
        a.pos = pos;
        a.cigar.clear();
        a.seq.clear();
        for (int j = 0; j < kManyOpsPairs; ++j) {
          a.seq.push_back(kBases[ref_.Base(0, pos + j)]);
          a.cigar.push_back(bam_cigar_gen(1, BAM_CMATCH));
          AppendRandomBases(rng, 1, &a.seq);
          a.cigar.push_back(bam_cigar_gen(1, BAM_CINS));
        }
        a.md.clear();
        AppendNumber(&a.md, kManyOpsPairs);  // insertions are not in MD
        a.nm = kManyOpsPairs;
        a.score = 0;
        a.ref_span = kManyOpsPairs;
        sim_.MakeQualities(2 * kManyOpsPairs, a.reverse, rng, &a.qual);
        return WriteSingleEnd(a, kind, 1);
      }
      case EdgeKind::kHugeIntArray:
      case EdgeKind::kHugeString:
      case EdgeKind::kTieBurst: {
        int32_t tid;
        int64_t pos;
        ref_.RandomLocus(rng, &tid, &pos);
        sim_.MakeQualities(rl, a.reverse, rng, &a.qual);
        sim_.Align(tid, pos, 0, rl, 0, a.qual.data(), rng, &a);
        if (kind == EdgeKind::kHugeIntArray) {
          huge_array_.resize(kHugeArrayElements);
          for (int32_t& v : huge_array_) {
            v = static_cast<int32_t>(static_cast<uint32_t>(rng.Next()));
          }
        } else if (kind == EdgeKind::kHugeString) {
          static constexpr char kAlnum[] =
              "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
          huge_string_.resize(kHugeStringLength);
          for (char& ch : huge_string_) ch = kAlnum[rng.Below(62)];
        }
        // Identical records that differ only in name: a sorter must keep
        // them in input order.
        return WriteSingleEnd(a, kind, kind == EdgeKind::kTieBurst ? kTieBurstSize : 1);
      }
      case EdgeKind::kFirstBase: {
        PairPlan plan;
        plan.tid = repeat % 2 == 0 ? 0 : last;
        plan.pos = 0;
        plan.reverse = 0;
        return EmitPair(plan, rng);
      }
      case EdgeKind::kLastBase: {
        // POS is the reference's last base; the rest of the read is
        // soft-clipped, on the right (forward) or the left (reverse).
        const int64_t pos = ref_.length(last) - 1;
        sim_.MakeQualities(rl, a.reverse, rng, &a.qual);
        sim_.Align(last, pos, a.reverse ? rl - 1 : 0, a.reverse ? 1 : rl, 0, a.qual.data(), rng,
                   &a);
        return WriteSingleEnd(a, kind, 1);
      }
      case EdgeKind::kLastReference: {
        PairPlan plan;
        plan.tid = last;
        return EmitPair(plan, rng);
      }
      case EdgeKind::kMateUnmapped: {
        PairPlan plan;
        plan.kind = PairKind::kOneUnmapped;
        plan.tid = repeat % 2 == 0 ? last : -1;
        return EmitPair(plan, rng);
      }
      case EdgeKind::kBothUnmapped: {
        PairPlan plan;
        plan.kind = PairKind::kBothUnmapped;
        return EmitPair(plan, rng);
      }
      case EdgeKind::kCount:
        break;
    }
    return Status::Error("internal error: bad edge-case kind");
  }

  // Writes `copies` single-end records of *a, each with a fresh name.
  Status WriteSingleEnd(const Alignment& a, EdgeKind kind, int copies) {
    aux_.Clear();
    AddAlignmentTags(a);
    AddScoreTags(a, edge_rng_);
    aux_.AddString("RG", kReadGroup);
    if (kind == EdgeKind::kHugeIntArray) aux_.AddInt32Array("ZB", huge_array_);
    if (kind == EdgeKind::kHugeString) aux_.AddString("ZZ", huge_string_);
    RecordFields f;
    f.flag = a.reverse ? BAM_FREVERSE : 0;
    f.tid = a.tid;
    f.pos = a.pos;
    f.mapq = a.mapq;
    f.cigar = &a.cigar;
    f.seq = a.seq;
    f.qual = a.qual;
    for (int c = 0; c < copies; ++c) {
      f.name = NextName();
      GEN_RETURN_IF_ERROR(writer_.Write(f, aux_));
    }
    return Status::Ok();
  }

  const Options& opts_;
  const Reference& ref_;
  ReadSimulator sim_;
  Writer writer_;
  Rng pair_rng_;  // ordinary pairs
  Rng name_rng_;  // x/y jitter in read names
  Rng edge_rng_;  // --edge-cases records
  double fragment_mean_ = 0;
  double fragment_sd_ = 0;

  // Scratch reused for every pair.
  Alignment mates_[2];
  Alignment sups_[2];
  Alignment secs_[2];
  bool has_sup_[2] = {false, false};
  bool has_sec_[2] = {false, false};
  Alignment single_;
  AuxBuilder aux_;
  std::string name_;
  std::string mate_cigar_;
  std::string cigar_text_;
  std::string sa_;
  std::vector<int32_t> huge_array_;
  std::string huge_string_;

  RecentRead recent_[kRecentReadSlots] = {};
  int n_recent_ = 0;
  int recent_next_ = 0;

  uint64_t name_serial_ = 0;
  uint64_t pairs_ = 0;           // ordinary and edge-case pairs
  uint64_t ordinary_pairs_ = 0;  // drives checkpoints and edge slots
  int next_edge_slot_ = 0;
  uint64_t edge_records_ = 0;
  uint64_t records_ = 0;
  uint64_t bytes_ = 0;
};

int Main(int argc, char** argv) {
  Options opts;
  std::string error;
  switch (ParseOptions(argc, argv, &opts, &error)) {
    case ParseResult::kHelp:
      PrintUsage(stdout);
      return std::fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
    case ParseResult::kMisuse:
      std::fprintf(stderr, "%s: %s\n\n", kProgramName, error.c_str());
      PrintUsage(stderr);
      return EXIT_FAILURE;
    case ParseResult::kRun:
      break;
  }
  hts_set_log_level(HTS_LOG_WARNING);

  const auto start = std::chrono::steady_clock::now();
  Reference ref;
  Status s = ref.Build(opts.refs, opts.genome_length, opts.seed);
  if (s.ok() && opts.edge_cases && ref.length(0) < kMinEdgeFirstRefLength) {
    s = Status::Error("--edge-cases needs a first reference of at least " +
                      std::to_string(kMinEdgeFirstRefLength) +
                      " bases; raise --genome-length or lower --refs");
  }
  std::unique_ptr<sam_hdr_t, HeaderFreer> header;
  if (s.ok()) s = BuildHeader(opts, ref, &header);
  Generator gen(opts, ref);
  if (s.ok()) s = gen.Run(header.get());
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", kProgramName, s.message().c_str());
    return EXIT_FAILURE;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr,
               "%s: wrote %" PRIu64 " records (%" PRIu64 " pairs, %" PRIu64
               " edge-case records), %" PRIu64 " bytes, to %s in %.1f s\n",
               kProgramName, gen.records(), gen.pairs(), gen.edge_records(), gen.bytes(),
               opts.output.c_str(), seconds);
  return EXIT_SUCCESS;
}

}  // namespace
}  // namespace rocksort

int main(int argc, char** argv) { return rocksort::Main(argc, argv); }
