#include "keycodec/sort_order.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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
  }
  return tag.empty() ? base : absl::StrCat("tag ", tag, ", then ", base);
}

HeaderSortFields HeaderFieldsFor(const SortOrder& order) {
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
  }
  return f;
}

}  // namespace rocksort::keycodec
