// gen_reads' command line: the options, their help text and their parsing.
//
// Internal to tools/gen_reads/.
#ifndef ROCKSORT_TOOLS_GEN_READS_OPTIONS_H_
#define ROCKSORT_TOOLS_GEN_READS_OPTIONS_H_

#include <cstdint>
#include <cstdio>
#include <string>

namespace rocksort {
namespace gen_reads {

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

// Prints the help text, defaults from Options, on `out`.
void PrintUsage(FILE* out);

enum class ParseResult { kRun, kHelp, kMisuse };

// Parses argv into *opts (which holds the defaults on entry) and records the
// command line for the @PG line. On kMisuse, *error holds the message.
ParseResult ParseOptions(int argc, char** argv, Options* opts, std::string* error);

}  // namespace gen_reads
}  // namespace rocksort

#endif  // ROCKSORT_TOOLS_GEN_READS_OPTIONS_H_
