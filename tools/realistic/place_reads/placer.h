// The placer: reads an aligner's templates, moves each to a random place
// on the GRCh38 header, renames it and writes it.
//
// Internal to tools/realistic/place_reads/.
#ifndef ROCKSORT_TOOLS_REALISTIC_PLACE_READS_PLACER_H_
#define ROCKSORT_TOOLS_REALISTIC_PLACE_READS_PLACER_H_

#include <htslib/hts.h>
#include <htslib/sam.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common.h"
#include "options.h"
#include "targets.h"

namespace rocksort {
namespace place_reads {

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
  absl::Status Run();

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
  absl::Status ProcessTemplate(size_t n, uint64_t first);

  // Chooses a translation for every input contig the records of pool_[0..n)
  // sit on (or point their mates to), and applies it to the core fields.
  absl::Status PlaceTemplate(size_t n);

  // The translation of input contig `tid` for this template; one is drawn
  // (so that [pos, pos + ref_length) lands on a random place) if no record
  // of the template sits there.
  absl::Status TranslationFor(int tid, int64_t pos, int64_t ref_length, const Translation** out);

  // Rewrites the contig names and positions of an SA:Z or XA:Z tag of
  // pool_[i] (already translated) through the template's mapping.
  //   SA:Z:rname,pos,strand,CIGAR,mapQ,NM;...
  //   XA:Z:rname,[+-]pos,CIGAR,NM;...
  absl::Status RewriteTag(bam1_t* b, const char tag[2], size_t i, const std::string& qname,
                          bool* seen);

  // Writes read 1 and read 2 of the template as an unmapped pair, as bwa mem
  // writes one: flags 77/141, no position, CIGAR or mate, the sequence and
  // qualities as sequenced, AS:i:0 XS:i:0 and the read group.
  absl::Status WriteUnmappedPair(const int primary[2], const std::string& name);

  // Writes b and counts it in stats_.
  absl::Status Write(const bam1_t* b);

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

}  // namespace place_reads
}  // namespace rocksort

#endif  // ROCKSORT_TOOLS_REALISTIC_PLACE_READS_PLACER_H_
