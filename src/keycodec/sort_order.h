// File: keycodec/sort_order.h
// -----------------------------------------------------------------------------
// The order a sort produces, as a value: which of samtools sort's orders
// (coordinate, -n/-N query name, -t TAG, --template-coordinate, -M
// minimiser) and the @HD header fields samtools 1.23.1 writes for it
// (HeaderFieldsFor; ApplySortOrder writes them into a header). The CLI
// resolves samtools' option combinations into one SortOrder (FromFlags);
// everything downstream (the key encoder, the output header, whether an
// index can be written) reads it from here. ../docs/key_format.md describes each order's key.
//
// Value type; thread-compatible.
#ifndef ROCKSORT_KEYCODEC_SORT_ORDER_H_
#define ROCKSORT_KEYCODEC_SORT_ORDER_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "htslib/sam.h"

namespace rocksort::keycodec {

// The primary order. With a tag (SortOrder::tag), records sort by the tag's
// value first and then by kQueryName's order, or by coordinate for any
// other kind.
enum class OrderKind {
  kCoordinate,          // samtools sort (default)
  kQueryName,           // -n (natural) or -N (lexicographic)
  kTemplateCoordinate,  // --template-coordinate
  kMinimiser,           // -M: coordinate, unplaced reads by their minimiser
};

// samtools sort -M's parameters (bam_sort.c, worker_minhash): the k-mer
// size (-K, 1..31) and which minimisers are tried. The defaults are
// samtools'.
struct MinimiserOptions {
  int kmer = 20;
  bool try_reverse = true;           // false with -R: the forward strand only.
  bool squash_homopolymers = false;  // -H: a run of one base counts once.
  friend bool operator==(const MinimiserOptions& a, const MinimiserOptions& b) {
    return a.kmer == b.kmer && a.try_reverse == b.try_reverse &&
           a.squash_homopolymers == b.squash_homopolymers;
  }
};

struct SortOrder {
  SortOrder() = default;
  // `minimiser` keeps its defaults; set it for kMinimiser.
  SortOrder(OrderKind kind, bool natural, std::string tag)
      : kind(kind), natural(natural), tag(std::move(tag)) {}

  OrderKind kind = OrderKind::kCoordinate;
  // Read names compare naturally (-n: digit runs by value) or as bytes
  // (-N). Matters for kQueryName, alone or as the secondary order of a tag.
  bool natural = true;
  // -t TAG: the two-character aux tag that sorts first; empty for none.
  // REQUIRES (FromFlags ensures it): empty unless kind is kCoordinate or
  // kQueryName.
  std::string tag;
  // kMinimiser's parameters; ignored by the other kinds.
  MinimiserOptions minimiser;

  // Resolves samtools sort's flags: `kind` is the last of -n / -N /
  // --template-coordinate / -M given (kCoordinate if none), `lexicographic`
  // whether -N was given at all (it switches natural comparison off for
  // good, so `-N -n` is lexicographic), `tag` the -t argument (empty if
  // none). As samtools, a tag turns any order but query name into
  // tag-then-coordinate (-M included), and only the tag's first two
  // characters count.
  // InvalidArgument when the tag has fewer than two characters.
  static absl::StatusOr<SortOrder> FromFlags(OrderKind kind, bool lexicographic,
                                             const std::string& tag);

  // Plain coordinate order.
  bool is_coordinate() const { return kind == OrderKind::kCoordinate && tag.empty(); }
  // The orders samtools writes an index for (--write-index): coordinate,
  // and the minimiser order, whose placed reads are in coordinate order.
  bool indexable() const { return is_coordinate() || kind == OrderKind::kMinimiser; }

  // For -v and messages: "coordinate", "queryname (natural)",
  // "tag RG, then coordinate", "template-coordinate"...
  std::string Describe() const;

  friend bool operator==(const SortOrder& a, const SortOrder& b) {
    return a.kind == b.kind && a.natural == b.natural && a.tag == b.tag &&
           a.minimiser == b.minimiser;
  }
};

// The @HD tags samtools 1.23.1's sort writes for an order (bam_sort.c,
// set_sort_order). An empty string means the tag is removed. `placed`:
// whether any record is on a reference (tid >= 0); only the minimiser
// order's fields depend on it (SO:coordinate SS:coordinate:minhash, or
// SO:unsorted SS:unsorted:minhash when every record is unplaced).
struct HeaderSortFields {
  std::string so;  // SO: coordinate, queryname or unsorted.
  std::string ss;  // SS: e.g. "queryname:natural", "unsorted:RG:coordinate".
  std::string go;  // GO: "query" for template-coordinate.
};
HeaderSortFields HeaderFieldsFor(const SortOrder& order, bool placed = true);

// The VN that samtools 1.23.1 writes in an @HD line it adds (its htslib's
// SAM_FORMAT_VERSION). Fixed here so that the linked htslib cannot change it.
inline constexpr char kAddedHeaderVersion[] = "1.6";

// Sets the @HD sort fields of `header` for `order` exactly as samtools
// 1.23.1's set_sort_order: SO (and SS, GO when the order has them) are
// updated in place in an existing @HD line, keeping VN and the order of the
// other tags (new tags go at the end, in the order SO, GO, SS); without an
// @HD line, "@HD VN:1.6 SO:... [GO:...] [SS:...]" is added. GO and SS are
// then removed if the order does not set them. Internal (htslib's text)
// when htslib fails. `placed` as for HeaderFieldsFor.
absl::Status ApplySortOrder(const SortOrder& order, sam_hdr_t* header, bool placed = true);

}  // namespace rocksort::keycodec

#endif  // ROCKSORT_KEYCODEC_SORT_ORDER_H_
