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
// It links only htslib and abseil, so that it builds whatever state the
// rocksort libraries are in.
//
// Files: options.{h,cc} (the command line), targets.h (random places on
// GRCh38 and read names), placer.{h,cc} (templates in, placed records out),
// common.h (constants, the random number generator, htslib handles) and this
// file (the header, the run and its statistics).

#include <htslib/hts.h>
#include <htslib/sam.h>
#include <htslib/thread_pool.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common.h"
#include "options.h"
#include "placer.h"

namespace rocksort {
namespace place_reads {

namespace {

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
}  // namespace place_reads
}  // namespace rocksort

int main(int argc, char** argv) { return rocksort::place_reads::Main(argc, argv); }
