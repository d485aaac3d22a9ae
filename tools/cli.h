// File: tools/cli.h
// -----------------------------------------------------------------------------
// The rocksort command line: parsing (into pipeline::SortOptions) kept apart
// from main() so that it can be tested, and RocksortMain(), which main()
// calls. Flags follow samtools sort where samtools has them.
#ifndef ROCKSORT_TOOLS_CLI_H_
#define ROCKSORT_TOOLS_CLI_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/pipeline.h"

namespace rocksort::tools {

struct Command {
  enum class Action { kSort, kHelp, kVersion };
  Action action = Action::kSort;
  pipeline::SortOptions sort;
  std::string stats_json;  // --stats-json FILE; empty = none.
  // --verbosity N: htslib's log level (hts_verbose), as samtools sets it.
  // Empty: htslib warnings with -v, silence otherwise (a failure is one line
  // of rocksort's own).
  std::optional<int> hts_verbosity;
  // --progress / --no-progress (the last wins). Empty: a status line when
  // stderr is a terminal.
  std::optional<bool> progress;
  // Options accepted but overridden, as samtools warns of them.
  std::vector<std::string> warnings;
};

// Parses argv. InvalidArgument (with a message for the user) on misuse.
// `stdin_is_terminal` decides whether a missing input means stdin or help.
absl::StatusOr<Command> ParseCommandLine(int argc, char** argv, bool stdin_is_terminal);

// The usage text, with defaults printed from SortOptions' real defaults.
std::string Usage();

// The whole program: parse, install signal handling, sort, report.
// Returns the process exit status (0, 1, or 128 + signal).
int RocksortMain(int argc, char** argv);

}  // namespace rocksort::tools

#endif  // ROCKSORT_TOOLS_CLI_H_
