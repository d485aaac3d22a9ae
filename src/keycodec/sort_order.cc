// File: keycodec/sort_order.cc
// -----------------------------------------------------------------------------
// SortOrder from samtools sort's flags, its description, and the @HD fields
// samtools 1.23.1 writes for it (HeaderFieldsFor, ApplySortOrder, after
// bam_sort.c's set_sort_order), so that rocksort's output header is
// samtools' byte for byte.
#include "keycodec/sort_order.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "htslib/sam.h"

namespace rocksort::keycodec {
namespace {

const char* NameOrder(bool natural) { return natural ? "natural" : "lexicographical"; }

}  // namespace

absl::StatusOr<SortOrder> SortOrder::FromFlags(OrderKind kind, bool lexicographic,
                                               const std::string& tag) {
  SortOrder order;
  order.kind = kind;
  order.natural = !lexicographic;
  if (!tag.empty()) {
    if (tag.size() < 2) {
      return absl::InvalidArgumentError(
          absl::StrFormat("-t \"%s\": a tag has two characters", tag));
    }
    order.tag = tag.substr(0, 2);
    if (kind != OrderKind::kQueryName) order.kind = OrderKind::kCoordinate;
  }
  return order;
}

std::string SortOrder::Describe() const {
  std::string base;
  switch (kind) {
    case OrderKind::kCoordinate:
      base = "coordinate";
      break;
    case OrderKind::kQueryName:
      base = absl::StrCat("queryname (", NameOrder(natural), ")");
      break;
    case OrderKind::kTemplateCoordinate:
      base = "template-coordinate";
      break;
    case OrderKind::kMinimiser:
      base = absl::StrCat("coordinate, unplaced reads by minimiser (k ", minimiser.kmer,
                          minimiser.try_reverse ? ", both strands" : ", forward strand",
                          minimiser.squash_homopolymers ? ", homopolymers squashed)" : ")");
      break;
  }
  return tag.empty() ? base : absl::StrCat("tag ", tag, ", then ", base);
}

HeaderSortFields HeaderFieldsFor(const SortOrder& order, bool placed) {
  HeaderSortFields f;
  const std::string name_order = absl::StrCat("queryname:", NameOrder(order.natural));
  if (!order.tag.empty()) {
    f.so = "unsorted";
    f.ss = absl::StrCat("unsorted:", order.tag, ":",
                        order.kind == OrderKind::kQueryName ? name_order : "coordinate");
    return f;
  }
  switch (order.kind) {
    case OrderKind::kCoordinate:
      f.so = "coordinate";
      break;
    case OrderKind::kQueryName:
      f.so = "queryname";
      f.ss = name_order;
      break;
    case OrderKind::kTemplateCoordinate:
      f.so = "unsorted";
      f.go = "query";
      f.ss = "unsorted:template-coordinate";
      break;
    case OrderKind::kMinimiser:
      f.so = placed ? "coordinate" : "unsorted";
      f.ss = placed ? "coordinate:minhash" : "unsorted:minhash";
      break;
  }
  return f;
}

namespace {

// samtools' sam_hdr_update_sort: update the @HD line, or add one when there is
// none (sam_hdr_update_line returns -1 then). The tags are passed as
// NULL-terminated varargs, as htslib wants them.
template <typename... Tags>
bool UpdateOrAddHd(sam_hdr_t* h, Tags... tags) {
  constexpr const char* kEnd = nullptr;
  return !(sam_hdr_update_line(h, "HD", kEnd, kEnd, tags..., kEnd) == -1 &&
           sam_hdr_add_line(h, "HD", "VN", kAddedHeaderVersion, tags..., kEnd) == -1);
}

}  // namespace

absl::Status ApplySortOrder(const SortOrder& order, sam_hdr_t* header, bool placed) {
  const HeaderSortFields f = HeaderFieldsFor(order, placed);
  const char* so = f.so.c_str();
  const char* go = f.go.c_str();
  const char* ss = f.ss.c_str();
  bool ok;
  if (f.ss.empty() && f.go.empty()) {
    ok = UpdateOrAddHd(header, "SO", so);
  } else if (f.go.empty()) {
    ok = UpdateOrAddHd(header, "SO", so, "SS", ss);
  } else if (f.ss.empty()) {
    ok = UpdateOrAddHd(header, "SO", so, "GO", go);
  } else {
    ok = UpdateOrAddHd(header, "SO", so, "GO", go, "SS", ss);
  }
  if (!ok) {
    return absl::InternalError(
        absl::StrCat("htslib failed to set the @HD sort order to SO:", f.so));
  }
  if (f.go.empty() && sam_hdr_remove_tag_hd(header, "GO") == -1) {
    return absl::InternalError("htslib failed to remove GO from the @HD line");
  }
  if (f.ss.empty() && sam_hdr_remove_tag_hd(header, "SS") == -1) {
    return absl::InternalError("htslib failed to remove SS from the @HD line");
  }
  return absl::OkStatus();
}

}  // namespace rocksort::keycodec
