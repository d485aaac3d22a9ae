// place_reads' command line: the options, their help text and parsing.
//
// Internal to tools/realistic/place_reads/.
#ifndef ROCKSORT_TOOLS_REALISTIC_PLACE_READS_OPTIONS_H_
#define ROCKSORT_TOOLS_REALISTIC_PLACE_READS_OPTIONS_H_

#include <cstdint>
#include <cstdio>
#include <string>

namespace rocksort {
namespace place_reads {

struct Options {
  std::string input = "-";
  std::string output = "-";
  int threads = 0;
  uint64_t seed = 1;
  double unmapped_frac = 0.015;
};

// Prints the help text, defaults from Options, on `out`.
void PrintUsage(FILE* out);

enum class ParseResult { kRun, kHelp, kMisuse };

// Parses argv into *opts (which holds the defaults on entry). On kMisuse,
// *error holds the message.
ParseResult ParseOptions(int argc, char** argv, Options* opts, std::string* error);

}  // namespace place_reads
}  // namespace rocksort

#endif  // ROCKSORT_TOOLS_REALISTIC_PLACE_READS_OPTIONS_H_
