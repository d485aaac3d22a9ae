#include "options.h"

#include <getopt.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common.h"

namespace rocksort {
namespace place_reads {

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

}  // namespace place_reads
}  // namespace rocksort
