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
// Besides htslib it links only rocksort_common, for the size parser that
// rocksort -m uses; its errors are a minimal local Status.
//
// Files: options.{h,cc} (the command line), reference.{h,cc} (the random
// genome), read_simulator.{h,cc} (qualities and alignments), writer.{h,cc}
// (header and records through htslib), generator.{h,cc} (pairs and the
// --target-bytes checkpoints), edge_cases.cc (--edge-cases), common.h
// (constants, Status, the random number generator) and this main().

#include <htslib/hts.h>
#include <htslib/sam.h>

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common.h"
#include "generator.h"
#include "options.h"
#include "reference.h"
#include "writer.h"

namespace rocksort {
namespace gen_reads {
namespace {

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
}  // namespace gen_reads
}  // namespace rocksort

int main(int argc, char** argv) { return rocksort::gen_reads::Main(argc, argv); }
