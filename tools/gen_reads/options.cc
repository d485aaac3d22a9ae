#include "options.h"

#include <getopt.h>

#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common.h"
#include "common/size.h"

namespace rocksort {
namespace gen_reads {
namespace {

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

// A size as rocksort -m reads it (common/size.h): a number with an optional
// K, M, G or T suffix, powers of 1024.
Status ParseSizeOption(std::string_view flag, const char* text, uint64_t* out) {
  const absl::StatusOr<uint64_t> size = ParseSize(text);
  if (!size.ok()) {
    return Status::Error(std::string(flag) + ": " + std::string(size.status().message()));
  }
  *out = *size;
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

}  // namespace

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
               "SIZE is a number with an optional K, M, G or T suffix (powers of\n"
               "1024, as in samtools): 1536K, 1.5M.\n",
               kProgramName, d.threads, d.seed, kMaxReadLength, d.read_length, d.refs,
               kMinRefLength, d.genome_length >> 20, d.unmapped_frac, d.tie_frac, kEdgeRepeats,
               kLongReadLength, 2 * kManyOpsPairs, kHugeArrayElements, kHugeStringLength,
               kTieBurstSize);
}

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
        s = ParseSizeOption("--target-bytes", optarg, &opts->target_bytes);
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
        s = ParseSizeOption("--genome-length", optarg, &opts->genome_length);
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

}  // namespace gen_reads
}  // namespace rocksort
