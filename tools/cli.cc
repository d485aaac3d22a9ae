#include "cli.h"

#include <getopt.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "common/allocator.h"
#include "common/errors.h"
#include "common/interrupt.h"
#include "common/size.h"
#include "common/status_macros.h"
#include "htslib/hts.h"
#include "loader/loader.h"
#include "output/output.h"
#include "progress.h"

#ifndef ROCKSORT_VERSION
#define ROCKSORT_VERSION "unknown"
#endif

namespace rocksort::tools {
namespace {

constexpr uint64_t kMinMemoryPerThread = uint64_t{1} << 20;  // As samtools.

enum LongOnly {
  kNoPg = 256,
  kVersion,
  kDisk,
  kRunCompression,
  kNoCompaction,
  kStatsJson,
  kReference,
  kWriteIndex,
  kOutputFmtOption,
  kTemplateCoordinate,
  kInputFmtOption,
  kVerbosity,
  kProgress,
  kNoProgress
};

// The inputs listed in `path` (-b), one path per line, as samtools merge
// reads them (hts_readlines): empty lines are skipped, a final "\r" is
// dropped, nothing else is trimmed (paths may hold spaces).
absl::StatusOr<std::vector<std::string>> ReadInputList(const std::string& path) {
  std::ifstream in(path);
  if (!in.is_open()) {
    return ErrnoStatus(errno, absl::StrFormat("-b: can't open the input list \"%s\"", path));
  }
  std::vector<std::string> paths;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) paths.push_back(line);
  }
  if (in.bad()) {
    return ErrnoStatus(errno, absl::StrFormat("-b: can't read the input list \"%s\"", path));
  }
  if (paths.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("-b: the input list \"%s\" names no input", path));
  }
  return paths;
}

absl::StatusOr<int> ParseInt(const char* flag, const char* text, int min, int max) {
  int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < min || value > max) {
    return absl::InvalidArgumentError(
        absl::StrFormat("invalid %s \"%s\": expected an integer in %d..%d", flag, text, min, max));
  }
  return value;
}

// Raises the soft open-files limit to the hard one: the final merge keeps
// one file open per sorted run.
void RaiseOpenFileLimit() {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

std::string Usage() {
  const pipeline::SortOptions d;
  return absl::StrFormat(
      "Usage: rocksort [options] [IN.bam|-] [OUT.bam]\n"
      "       rocksort [options] -o OUT.bam [IN.bam|-]...\n"
      "\n"
      "Sorts SAM/BAM/CRAM alignments like `samtools sort`, through a temporary\n"
      "RocksDB. Input from a file or stdin (`-`, or omitted when stdin is not a\n"
      "terminal); output to OUT or stdout, in the format samtools would write.\n"
      "Several inputs (with -o, or -b) are sorted as their concatenation, as\n"
      "`samtools cat` then `samtools sort`; their headers are combined as\n"
      "`samtools merge` combines them, and must have the same @SQ lines.\n"
      "\n"
      "Order (as samtools; the last of -n, -N, --template-coordinate, -M wins):\n"
      "  [default]     by coordinate\n"
      "  -n            by read name, natural (digit runs compare as numbers)\n"
      "  -N            by read name, byte order (also makes -n byte order)\n"
      "  -t TAG        by the value of TAG first, then by coordinate, or by name\n"
      "                with -n/-N\n"
      "  --template-coordinate  by the template's outer ends, library, MI and\n"
      "                name (for UMI tools); needs MC tags (samtools fixmate)\n"
      "  -M            by coordinate, then the unplaced reads clustered by the\n"
      "                minimiser of their sequence (its k-mer of smallest hash); as\n"
      "                samtools, a read whose minimiser is on the reverse strand is\n"
      "                reverse-complemented, and unplaced reads are written with\n"
      "                POS, PNEXT and TLEN 0. With -t, the tag order instead\n"
      "  -K INT        -M's k-mer size, 1..31 [20]\n"
      "  -R            -M: forward-strand minimisers only\n"
      "  -H            -M: squash homopolymers (a run of one base counts once)\n"
      "\n"
      "Input/output:\n"
      "  -b FILE       also read the inputs listed in FILE, one path per line, before\n"
      "                those on the command line (as samtools merge -b); repeatable\n"
      "  -o FILE       write the sorted output to FILE [stdout]; as in samtools, its\n"
      "                name chooses the format: .sam SAM, .sam.gz BGZF-compressed SAM,\n"
      "                .cram CRAM, .fq/.fastq FASTQ, .fa/.fasta FASTA (those also\n"
      "                with .gz), anything else BAM\n"
      "  -O, --output-fmt FORMAT[,OPTION[=VALUE]]...  output format whatever the\n"
      "                name: bam, sam, sam.gz, cram, fastq, fasta; options as below\n"
      "  --output-fmt-option OPTION[=VALUE]  one of htslib's output format options,\n"
      "                as samtools: level=N (0..9; overrides -l and -u), for CRAM\n"
      "                version=3.0, embed_ref=1, no_ref=1, reference=FASTA, ...\n"
      "  --reference FILE  reference FASTA for CRAM input and output; for SAM text\n"
      "                without @SQ lines, a FASTA index (.fai) naming the references\n"
      "  -l INT        compression level 0..9 of BAM, CRAM and BGZF text output;\n"
      "                uncompressed SAM ignores it, as in samtools [BAM: %s]\n"
      "  -u            uncompressed output (same as -l 0; the later wins)\n"
      "  --no-PG       do not add a @PG line to the header\n"
      "  --write-index also write an index: OUT.csi (OUT.crai for CRAM), or INDEX\n"
      "                for -o OUT##idx##INDEX (BAI if INDEX ends in .bai), as\n"
      "                samtools sort --write-index; not for uncompressed SAM; ignored,\n"
      "                with a warning, for orders other than coordinate and -M\n"
      "  --input-fmt-option OPTION[=VALUE]  one of htslib's input format options,\n"
      "                as samtools: required_fields=0x..., decode_md=0 (CRAM),\n"
      "                filter=EXPR (keep only the records EXPR accepts), ...\n"
      "\n"
      "Resources:\n"
      "  -@, --threads INT  threads for decoding, sorting and compression [%d]\n"
      "  -m SIZE       memory per thread; K/M/G/T suffixes (also KB, KiB...) are\n"
      "                powers of 1024 [%s]\n"
      "  -T PREFIX     temporary database at PREFIX.rocksort.XXXXXX, or inside\n"
      "                PREFIX if it is a directory [beside the output; $TMPDIR or .\n"
      "                when writing to stdout]\n"
      "  -s SIZE       estimated uncompressed size of the data (about 4x the BAM);\n"
      "                runs are merged in the background while loading when the\n"
      "                data is many times larger than memory; 0 = never\n"
      "                [estimated from the input file; adaptive for a pipe]\n"
      "  --no-compaction  same as -s 0: the final merge reads the sorted runs\n"
      "                directly, merging first only what memory cannot hold;\n"
      "                fastest where seeks are cheap, slow on a rotating disk\n"
      "  --disk KIND   auto, ssd or hdd: the disk under the temporary database;\n"
      "                hdd reads each run in larger chunks; auto asks sysfs whether\n"
      "                the device rotates [auto]\n"
      "  --run-compression auto|lz4|snappy|zstd|none  compression of the\n"
      "                temporary sorted runs (only of the merged ones where runs\n"
      "                are merged while loading); zstd: about a third less scratch\n"
      "                space and disk traffic than lz4, for more CPU; none: the\n"
      "                least CPU, for fast disks with room to spare; auto: lz4,\n"
      "                but none for the few large runs of a sort that needs no\n"
      "                merge once the disk writes them well ahead of the load and\n"
      "                has room for them [auto]\n"
      "\n"
      "General:\n"
      "  -v            print the plan and statistics on stderr\n"
      "  --verbosity INT  htslib's verbosity, as samtools' (3: warnings, 0: none)\n"
      "                [warnings with -v, none without]\n"
      "  --progress, --no-progress  a status line on stderr (phase, records,\n"
      "                bytes, percentage, rate, ETA), updated 4 times a second\n"
      "                [when stderr is a terminal]\n"
      "  --stats-json FILE  write the statistics as JSON to FILE\n"
      "  -h, --help    print this help and exit\n"
      "  --version     print the version and exit\n",
      d.format.level < 0 ? "6" : absl::StrCat(d.format.level), d.threads,
      FormatSize(d.memory_per_thread));
}

absl::StatusOr<Command> ParseCommandLine(int argc, char** argv, bool stdin_is_terminal) {
  static const struct option kLongOptions[] = {
      {"help", no_argument, nullptr, 'h'},
      {"no-PG", no_argument, nullptr, kNoPg},
      {"version", no_argument, nullptr, kVersion},
      {"disk", required_argument, nullptr, kDisk},
      {"run-compression", required_argument, nullptr, kRunCompression},
      {"no-compaction", no_argument, nullptr, kNoCompaction},
      {"stats-json", required_argument, nullptr, kStatsJson},
      {"verbose", no_argument, nullptr, 'v'},
      {"threads", required_argument, nullptr, '@'},
      {"output-fmt", required_argument, nullptr, 'O'},
      {"reference", required_argument, nullptr, kReference},
      {"write-index", no_argument, nullptr, kWriteIndex},
      {"output-fmt-option", required_argument, nullptr, kOutputFmtOption},
      {"template-coordinate", no_argument, nullptr, kTemplateCoordinate},
      {"input-fmt-option", required_argument, nullptr, kInputFmtOption},
      {"verbosity", required_argument, nullptr, kVerbosity},
      {"progress", no_argument, nullptr, kProgress},
      {"no-progress", no_argument, nullptr, kNoProgress},
      {nullptr, 0, nullptr, 0}};
  Command command;
  pipeline::SortOptions& o = command.sort;
  o.version = ROCKSORT_VERSION;
  std::vector<std::string> args(argv, argv + argc);
  o.command_line = absl::StrJoin(args, " ");
  bool output_given = false;
  // -b lists, read in order: their inputs come before the positional ones.
  std::vector<std::string> listed_inputs;
  // -O, --output-fmt-option, --reference, -l and -u, in order, as samtools
  // collects them; resolved once the output's name is known.
  output::OutputFormatRequest format;
  // The order as samtools builds it: the last of -n/-N/--template-coordinate/
  // -M, whether -N was seen at all, and -t's tag.
  keycodec::OrderKind order_kind = keycodec::OrderKind::kCoordinate;
  bool lexicographic = false;
  std::string sort_tag;
  // -K, -R and -H set the minimiser order's parameters; the first of them
  // given, for a message when the order is not -M.
  keycodec::MinimiserOptions minimiser;
  std::string minimiser_flag;

  optind = 0;  // Full reset of getopt, so tests can parse repeatedly.
  opterr = 0;
  for (;;) {
    const int c =
        getopt_long(argc, argv, ":o:O:l:u@:m:T:s:vhnNt:b:MI:K:w:HR", kLongOptions, nullptr);
    if (c == -1) break;
    switch (c) {
      case 'o':
        o.output = optarg;
        output_given = true;
        break;
      case 'b': {
        ASSIGN_OR_RETURN(const std::vector<std::string> listed, ReadInputList(optarg));
        listed_inputs.insert(listed_inputs.end(), listed.begin(), listed.end());
        break;
      }
      case 'O': {
        // FORMAT[,OPTION...]: as htslib's hts_parse_format, a later -O
        // replaces the format and adds its options to the earlier ones.
        const std::string what = absl::StrCat("-O ", optarg);
        const std::vector<absl::string_view> parts = absl::StrSplit(optarg, ',');
        format.format = std::string(parts[0]);
        format.format_origin = what;
        for (size_t i = 1; i < parts.size(); ++i) {
          if (parts[i].empty()) continue;  // "bam," as samtools allows
          format.options.push_back({std::string(parts[i]), what});
        }
        break;
      }
      case kOutputFmtOption:
        format.options.push_back({optarg, absl::StrCat("--output-fmt-option ", optarg)});
        break;
      case kWriteIndex:
        o.write_index = true;
        break;
      case kInputFmtOption:
        RETURN_IF_ERROR(loader::CheckInputFormatOption(optarg));
        o.input_format_options.push_back(optarg);
        break;
      case kVerbosity: {
        // samtools takes any integer (atoi); htslib logs nothing below 1
        // and everything from 10 (HTS_LOG_TRACE) on.
        absl::StatusOr<int> level =
            ParseInt("--verbosity", optarg, 0, std::numeric_limits<int>::max());
        if (!level.ok()) return level.status();
        command.hts_verbosity = *level;
        break;
      }
      case kProgress:
        command.progress = true;
        break;
      case kNoProgress:
        command.progress = false;
        break;
      case kReference:
        if (*optarg == '\0') return absl::InvalidArgumentError("--reference needs a file name");
        o.reference = optarg;
        // As samtools: the reference of the input and of a CRAM output.
        format.options.push_back(
            {absl::StrCat("reference=", optarg), absl::StrCat("--reference ", optarg)});
        break;
      case 'l': {
        absl::StatusOr<int> level = ParseInt("-l", optarg, 0, 9);
        if (!level.ok()) return level.status();
        format.level = *level;
        break;
      }
      case 'u':  // As in samtools, the later of -u and -l wins.
        format.level = 0;
        break;
      case '@': {
        absl::StatusOr<int> threads = ParseInt("-@", optarg, 0, 1024);
        if (!threads.ok()) return threads.status();
        o.threads = std::max(1, *threads);
        break;
      }
      case 'm': {
        absl::StatusOr<uint64_t> size = ParseSize(optarg);
        if (!size.ok())
          return absl::InvalidArgumentError(absl::StrCat("-m: ", size.status().message()));
        if (*size < kMinMemoryPerThread) {
          return absl::InvalidArgumentError(
              absl::StrFormat("-m %s is too small: at least 1M per thread", optarg));
        }
        o.memory_per_thread = *size;
        break;
      }
      case 'T':
        if (*optarg == '\0') return absl::InvalidArgumentError("-T needs a non-empty prefix");
        o.temp_prefix = optarg;
        break;
      case 's': {
        absl::StatusOr<uint64_t> size = ParseSize(optarg);
        if (!size.ok())
          return absl::InvalidArgumentError(absl::StrCat("-s: ", size.status().message()));
        o.size_hint = *size;
        break;
      }
      case kDisk:
        if (std::string(optarg) == "auto") {
          o.disk.reset();
        } else if (std::string(optarg) == "ssd") {
          o.disk = DiskKind::kSsd;
        } else if (std::string(optarg) == "hdd") {
          o.disk = DiskKind::kHdd;
        } else {
          return absl::InvalidArgumentError(
              absl::StrFormat("invalid --disk \"%s\": expected auto, ssd or hdd", optarg));
        }
        break;
      case kRunCompression:
        if (std::string(optarg) == "auto") {
          o.run_compression = store::RunCompression::kAuto;
        } else if (std::string(optarg) == "lz4") {
          o.run_compression = store::RunCompression::kLz4;
        } else if (std::string(optarg) == "snappy") {
          o.run_compression = store::RunCompression::kSnappy;
        } else if (std::string(optarg) == "zstd") {
          o.run_compression = store::RunCompression::kZstd;
        } else if (std::string(optarg) == "none") {
          o.run_compression = store::RunCompression::kNone;
        } else {
          return absl::InvalidArgumentError(absl::StrFormat(
              "invalid --run-compression \"%s\": expected auto, lz4, snappy, zstd or none",
              optarg));
        }
        break;
      case 'v':
        ++o.verbosity;
        break;
      case kNoCompaction:
        o.size_hint = 0;
        break;
      case kStatsJson:
        if (*optarg == '\0') return absl::InvalidArgumentError("--stats-json needs a file name");
        command.stats_json = optarg;
        break;
      case kNoPg:
        o.add_pg = false;
        break;
      case 'N':  // As in samtools: -N also makes a later -n lexicographic.
        lexicographic = true;
        order_kind = keycodec::OrderKind::kQueryName;
        break;
      case 'n':
        order_kind = keycodec::OrderKind::kQueryName;
        break;
      case kTemplateCoordinate:
        order_kind = keycodec::OrderKind::kTemplateCoordinate;
        break;
      case 't':
        sort_tag = optarg;
        break;
      case 'M':
        order_kind = keycodec::OrderKind::kMinimiser;
        break;
      case 'K': {
        ASSIGN_OR_RETURN(minimiser.kmer, ParseInt("-K", optarg, 1, 31));
        if (minimiser_flag.empty()) minimiser_flag = "-K";
        break;
      }
      case 'R':
        minimiser.try_reverse = false;
        if (minimiser_flag.empty()) minimiser_flag = "-R";
        break;
      case 'H':
        minimiser.squash_homopolymers = true;
        if (minimiser_flag.empty()) minimiser_flag = "-H";
        break;
      case 'I':
      case 'w':
        return absl::InvalidArgumentError(absl::StrFormat(
            "-%c: minimisers placed by a reference index (samtools sort -I FASTA and its "
            "window -w) are not supported; -M clusters unplaced reads without one",
            static_cast<char>(c)));
      case 'h':
        command.action = Command::Action::kHelp;
        return command;
      case kVersion:
        command.action = Command::Action::kVersion;
        return command;
      case ':':
        return absl::InvalidArgumentError(
            absl::StrFormat("option %s needs a value", argv[optind - 1]));
      default:
        // A short option inside a group ("-vZ") has not moved optind on;
        // getopt names it in optopt. An unknown long option is the argument
        // just passed (optopt 0).
        if (optopt > 0 && optopt < 128) {
          return absl::InvalidArgumentError(absl::StrFormat("unknown option -%c", optopt));
        }
        return absl::InvalidArgumentError(absl::StrFormat("unknown option %s", argv[optind - 1]));
    }
  }
  ASSIGN_OR_RETURN(o.order, keycodec::SortOrder::FromFlags(order_kind, lexicographic, sort_tag));
  if (o.order.kind == keycodec::OrderKind::kMinimiser) {
    o.order.minimiser = minimiser;
  } else if (!minimiser_flag.empty()) {
    // samtools parses them and does nothing: say so rather than ignore them.
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s only applies to the minimiser order (-M)%s", minimiser_flag,
        order_kind == keycodec::OrderKind::kMinimiser ? ", which -t replaces by its tag order"
                                                      : ""));
  }
  // The budget, threads x -m, must stay a size (ParseSize caps one at 2^62).
  if (o.memory_per_thread > (uint64_t{1} << 62) / static_cast<uint64_t>(o.threads)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("-m %s x %d threads is too large a memory budget",
                        FormatSize(o.memory_per_thread), o.threads));
  }

  // With -o every positional argument is an input; without, "[IN [OUT]]".
  std::vector<std::string> positional(argv + optind, argv + argc);
  if (!output_given && positional.size() > 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("too many arguments (\"%s\"): with several inputs, name the output with -o",
                        absl::StrJoin(positional, " ")));
  }
  if (!output_given && positional.size() == 2) {
    o.output = positional[1];
    positional.pop_back();
  }
  o.inputs = std::move(listed_inputs);
  o.inputs.insert(o.inputs.end(), positional.begin(), positional.end());
  if (o.inputs.empty()) {
    if (stdin_is_terminal) {
      command.action = Command::Action::kHelp;
      return command;
    }
    o.inputs = {"-"};
  }
  // samtools' "OUT##idx##INDEX" names the index of OUT.
  if (const size_t at = o.output.find(HTS_IDX_DELIM); at != std::string::npos) {
    o.index_output = o.output.substr(at + std::strlen(HTS_IDX_DELIM));
    o.output.resize(at);
    if (o.output.empty() || o.index_output.empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("invalid output \"%s%s%s\": expected OUT%sINDEX", o.output, HTS_IDX_DELIM,
                          o.index_output, HTS_IDX_DELIM));
    }
  }
  // As samtools: -O, else the output's name (level= options override -l
  // and -u, as samtools applies them after opening).
  format.path = o.output;
  ASSIGN_OR_RETURN(o.format, output::ResolveOutputFormat(format));
  if (o.write_index && !o.order.indexable()) {
    // As samtools: a warning, and the sort goes on without an index.
    command.warnings.push_back("ignoring --write-index: an index needs coordinate-sorted output");
    o.write_index = false;
    o.index_output.clear();
  }
  if (o.write_index && o.output == "-") {
    return absl::InvalidArgumentError("--write-index needs an output file (-o FILE), not stdout");
  }
  if (o.write_index && !o.format.indexable()) {
    // samtools fails too, but only after sorting.
    return absl::InvalidArgumentError(absl::StrFormat(
        "--write-index: %s output can't be indexed; write BAM, CRAM or BGZF-compressed SAM "
        "(.sam.gz)",
        o.format.Describe()));
  }
  return command;
}

int RocksortMain(int argc, char** argv) {
  // htslib stays quiet while the command line is checked (its parser logs
  // its own line for an unknown --input-fmt-option, which ours names);
  // the command line sets its level below.
  hts_set_log_level(HTS_LOG_OFF);
  absl::StatusOr<Command> command = ParseCommandLine(argc, argv, isatty(STDIN_FILENO) != 0);
  if (!command.ok()) {
    std::fprintf(stderr, "rocksort: %s\n\n%s", std::string(command.status().message()).c_str(),
                 Usage().c_str());
    return 1;
  }
  if (command->action == Command::Action::kHelp) {
    std::fputs(Usage().c_str(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  if (command->action == Command::Action::kVersion) {
    std::printf("rocksort %s (htslib %s)\n", ROCKSORT_VERSION, hts_version());
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  for (const std::string& warning : command->warnings) {
    std::fprintf(stderr, "rocksort: warning: %s\n", warning.c_str());
  }
#ifndef __OPTIMIZE__
  std::fputs("rocksort: warning: built without optimisation; expect it to be slow\n", stderr);
#endif
  // A closed stdout must surface as a write error (EPIPE) that cleans up,
  // not as a silent death by SIGPIPE that leaves the temp DB behind.
  signal(SIGPIPE, SIG_IGN);
  // Likewise a file size limit (ulimit -f): the write fails with EFBIG,
  // naming the file, instead of the process dying with its temporary data.
  signal(SIGXFSZ, SIG_IGN);
  RaiseOpenFileLimit();
  // Before any thread allocates (common/allocator.h).
  ConfigureAllocator(pipeline::MemoryBudget(command->sort));
  // Every failure is reported as one line that names the file and record
  // (the loader maps htslib's return codes); htslib's own multi-line
  // diagnostics are shown with -v, or at the level --verbosity sets, as
  // samtools sets hts_verbose.
  if (command->hts_verbosity.has_value()) {
    hts_verbose = *command->hts_verbosity;
  } else {
    hts_set_log_level(command->sort.verbosity > 0 ? HTS_LOG_WARNING : HTS_LOG_OFF);
  }

  // Before any thread starts, so all inherit the blocked signal mask.
  InterruptGuard guard;
  pipeline::SortObserver observer;
  pipeline::SortProgress progress;
  std::unique_ptr<ProgressDisplay> display;
  if (command->progress.value_or(isatty(STDERR_FILENO) != 0)) {
    display = std::make_unique<ProgressDisplay>(progress, STDERR_FILENO);
    observer.progress = &progress;
    observer.on_phase = [&display](pipeline::Phase phase) { display->OnPhase(phase); };
  }
  observer.on_notice = [&display](const std::string& line) {
    if (display != nullptr) {
      display->Print(absl::StrCat("rocksort: ", line));
    } else {
      std::fprintf(stderr, "rocksort: %s\n", line.c_str());
    }
  };
  pipeline::SortReport report;
  const absl::Status status =
      pipeline::RunSort(command->sort, &guard.cancelled(), &guard, observer, &report);
  // The status line is erased before anything else is printed.
  if (display != nullptr) display->Stop();
  guard.Disarm();
  // A signal that arrives after the output was committed does not undo it.
  if (!status.ok() && guard.signal_number() != 0) {
    std::fprintf(stderr, "rocksort: interrupted by signal %d; temporary data removed\n",
                 guard.signal_number());
    return 128 + guard.signal_number();
  }
  if (!status.ok()) {
    std::fprintf(stderr, "rocksort: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  // After success only: a failing run prints exactly one line, its error.
  for (const pipeline::SortReport::TruncatedInput& t : report.inputs_missing_eof_marker) {
    std::fprintf(stderr,
                 "rocksort: warning: %s has no end-of-file marker and may be truncated; "
                 "sorted the %llu records it holds\n",
                 t.name.c_str(), static_cast<unsigned long long>(t.records));
  }
  if (command->sort.verbosity > 0) {
    std::fprintf(stderr, "rocksort: version %s; command line: %s\n%s", ROCKSORT_VERSION,
                 command->sort.command_line.c_str(), report.ToText().c_str());
  }
  if (!command->stats_json.empty()) {
    FILE* f = std::fopen(command->stats_json.c_str(), "w");
    const std::string json = report.ToJson();
    if (f == nullptr || std::fputs(json.c_str(), f) < 0 || std::fclose(f) != 0) {
      std::fprintf(stderr, "rocksort: can't write statistics to \"%s\": %s\n",
                   command->stats_json.c_str(), std::strerror(errno));
      return 1;
    }
  }
  return 0;
}

}  // namespace rocksort::tools
