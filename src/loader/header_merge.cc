#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "htslib/kstring.h"
#include "loader/header_merge_internal.h"

namespace rocksort::loader {
namespace {

// An owned kstring_t, freed on every way out.
class KString {
 public:
  KString() = default;
  KString(const KString&) = delete;
  KString& operator=(const KString&) = delete;
  ~KString() { ks_free(&ks_); }
  kstring_t* get() { return &ks_; }
  std::string str() const { return std::string(ks_.s == nullptr ? "" : ks_.s, ks_.l); }

 private:
  kstring_t ks_ = {0, 0, nullptr};
};

// A header line for a message: tabs shown as spaces.
std::string Shown(const std::string& line) { return absl::StrReplaceAll(line, {{"\t", " "}}); }

absl::Status ParseError(const std::string& name) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: the header does not parse (a malformed line or a duplicate ID; -v shows htslib's "
      "reason)",
      name));
}

// The @SQ line of reference `tid` as htslib prints it; made up from the
// name and length when the header has no text for it (SAM text whose
// references came from a FASTA index).
std::string SqLine(sam_hdr_t* h, int tid) {
  KString line;
  if (sam_hdr_find_line_id(h, "SQ", "SN", sam_hdr_tid2name(h, tid), line.get()) == 0) {
    return line.str();
  }
  return absl::StrFormat("@SQ\tSN:%s\tLN:%d", sam_hdr_tid2name(h, tid),
                         static_cast<int64_t>(sam_hdr_tid2len(h, tid)));
}

// The M5 of reference `tid`; empty if it has none.
std::string Md5(sam_hdr_t* h, int tid) {
  KString md5;
  if (sam_hdr_find_tag_id(h, "SQ", "SN", sam_hdr_tid2name(h, tid), "M5", md5.get()) != 0) {
    return "";
  }
  return md5.str();
}

// OK when `h` (input `name`) lists the references of `first` (input
// `first_name`) in the same order: the same names and lengths, and the same
// M5 where both give one.
absl::Status CheckSameReferences(sam_hdr_t* first, const std::string& first_name, sam_hdr_t* h,
                                 const std::string& name) {
  const int n_first = sam_hdr_nref(first);
  const int n = sam_hdr_nref(h);
  for (int tid = 0; tid < std::max(n, n_first); ++tid) {
    std::string detail;
    if (tid >= n) {
      detail = absl::StrFormat("it has no @SQ line %d, %s has \"%s\"", tid + 1, first_name,
                               Shown(SqLine(first, tid)));
    } else if (tid >= n_first) {
      detail = absl::StrFormat("@SQ line %d is \"%s\", %s has no line %d", tid + 1,
                               Shown(SqLine(h, tid)), first_name, tid + 1);
    } else {
      const std::string md5 = Md5(h, tid);
      const std::string first_md5 = Md5(first, tid);
      if (std::string(sam_hdr_tid2name(h, tid)) == sam_hdr_tid2name(first, tid) &&
          sam_hdr_tid2len(h, tid) == sam_hdr_tid2len(first, tid) &&
          (md5.empty() || first_md5.empty() || md5 == first_md5)) {
        continue;
      }
      detail = absl::StrFormat("@SQ line %d is \"%s\", %s has \"%s\"", tid + 1,
                               Shown(SqLine(h, tid)), first_name, Shown(SqLine(first, tid)));
    }
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: its references differ from those of %s: %s; inputs sorted together "
                        "must have the same @SQ lines in the same order",
                        name, first_name, detail));
  }
  return absl::OkStatus();
}

// `line` with the value of its ID field replaced by `id` (as samtools: the
// first "\tID:", up to the next tab or the end).
std::string WithId(std::string line, const std::string& id) {
  const size_t at = line.find("\tID:");
  if (at == std::string::npos) return line;
  const size_t begin = at + 4;
  const size_t end = std::min(line.find('\t', begin), line.size());
  return line.replace(begin, end - begin, id);
}

// samtools' trans_rg_pg without override or combining: the @RG or @PG
// lines (`type`) of `h`, with IDs already in `known` renamed; fills `map`
// (every ID of `h` -> its merged ID) and adds the new IDs to `known`.
absl::StatusOr<std::vector<std::string>> TranslateIds(
    sam_hdr_t* h, const std::string& name, const char* type, std::set<std::string>* known,
    std::map<std::string, std::string, std::less<>>* map, Rand48* random, bool* renamed) {
  std::vector<std::string> lines;
  const int count = sam_hdr_count_lines(h, type);
  if (count < 0) return ParseError(name);
  for (int i = 0; i < count; ++i) {
    KString id_text;
    if (sam_hdr_find_tag_pos(h, type, i, "ID", id_text.get()) != 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: @%s line %d has no ID", name, type, i + 1));
    }
    const std::string id = id_text.str();
    std::string new_id = id;
    if (known->count(id) != 0) {
      do {
        new_id = absl::StrFormat("%s-%08X", id, random->Next());
      } while (known->count(new_id) != 0);
      *renamed = true;
    }
    KString line;
    if (sam_hdr_find_line_id(h, type, "ID", id.c_str(), line.get()) != 0) return ParseError(name);
    lines.push_back(new_id == id ? line.str() : WithId(line.str(), new_id));
    known->insert(new_id);
    (*map)[id] = new_id;
  }
  return lines;
}

// samtools' finish_rg_pg: the first `field` ("\tPG:" in @RG lines, "\tPP:"
// in @PG lines) of each line points at the @PG line's merged ID. A
// reference to an ID the input does not define is left as it is.
void FixPgReferences(const std::string& field,
                     const std::map<std::string, std::string, std::less<>>& pg,
                     std::vector<std::string>* lines) {
  for (std::string& line : *lines) {
    const size_t at = line.find(field);
    if (at == std::string::npos) continue;
    const size_t begin = at + field.size();
    const size_t end = std::min(line.find('\t', begin), line.size());
    const auto it = pg.find(line.substr(begin, end - begin));
    if (it != pg.end()) line.replace(begin, end - begin, it->second);
  }
}

// Replaces the Z tag `tag` of `b`, if its value is in `map`, by the mapped
// value at the end of the tags (samtools' bam_translate).
absl::Status Retag(const char* tag, const std::map<std::string, std::string, std::less<>>& map,
                   bam1_t* b) {
  uint8_t* aux = bam_aux_get(b, tag);
  if (aux == nullptr) return absl::OkStatus();
  const char* value = bam_aux2Z(aux);
  if (value == nullptr) return absl::OkStatus();  // Not a Z tag: samtools' lookup fails too.
  const auto it = map.find(value);
  if (it == map.end()) return absl::OkStatus();
  if (bam_aux_del(b, aux) != 0 ||
      bam_aux_append(b, tag, 'Z', static_cast<int>(it->second.size() + 1),
                     reinterpret_cast<const uint8_t*>(it->second.c_str())) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("read \"%s\": can't rewrite its %s tag", bam_get_qname(b), tag));
  }
  return absl::OkStatus();
}

// Whether the Z tag `tag` of `b` holds an ID that `map` renames.
bool HasRenamedId(const bam1_t* b, const char* tag,
                  const std::map<std::string, std::string, std::less<>>& map) {
  const uint8_t* aux = bam_aux_get(b, tag);
  if (aux == nullptr) return false;
  const char* value = bam_aux2Z(aux);
  if (value == nullptr) return false;
  const auto it = map.find(value);
  return it != map.end() && it->second != it->first;
}

}  // namespace

HeaderMerger::HeaderMerger() = default;
HeaderMerger::~HeaderMerger() = default;

absl::Status HeaderMerger::Add(sam_hdr_t* header, const std::string& name) {
  // @HD: the first input's that has one.
  if (!have_hd_) {
    KString hd;
    const int r = sam_hdr_find_hd(header, hd.get());
    if (r < -1) return ParseError(name);
    if (r == 0) {
      hd_text_ = absl::StrCat(hd.str(), "\n");
      have_hd_ = true;
    }
  }
  // @SQ: the first input's, which all must share.
  if (sam_hdr_count_lines(header, "SQ") < 0) return ParseError(name);
  if (first_ == nullptr) {
    first_ = header;
    first_name_ = name;
  } else {
    RETURN_IF_ERROR(CheckSameReferences(first_, first_name_, header, name));
  }
  // @RG, @PG and @CO of every input, each type in input order.
  IdTranslation t;
  ASSIGN_OR_RETURN(std::vector<std::string> rg_lines,
                   TranslateIds(header, name, "RG", &rg_ids_, &t.rg, &random_, &t.renamed));
  ASSIGN_OR_RETURN(std::vector<std::string> pg_lines,
                   TranslateIds(header, name, "PG", &pg_ids_, &t.pg, &random_, &t.renamed));
  FixPgReferences("\tPG:", t.pg, &rg_lines);
  FixPgReferences("\tPP:", t.pg, &pg_lines);
  for (const std::string& line : rg_lines) absl::StrAppend(&rg_text_, line, "\n");
  for (const std::string& line : pg_lines) absl::StrAppend(&pg_text_, line, "\n");
  const int comments = sam_hdr_count_lines(header, "CO");
  if (comments < 0) return ParseError(name);
  for (int c = 0; c < comments; ++c) {
    KString line;
    if (sam_hdr_find_line_pos(header, "CO", c, line.get()) != 0) return ParseError(name);
    absl::StrAppend(&co_text_, line.str(), "\n");
  }
  translations_.push_back(std::move(t));
  return absl::OkStatus();
}

absl::StatusOr<MergedHeader> HeaderMerger::Finish() {
  std::string text = hd_text_;
  for (int tid = 0; tid < sam_hdr_nref(first_); ++tid) {
    absl::StrAppend(&text, SqLine(first_, tid), "\n");
  }
  absl::StrAppend(&text, rg_text_, pg_text_, co_text_);
  MergedHeader merged;
  merged.translations = std::move(translations_);
  merged.header.reset(sam_hdr_init());
  if (merged.header == nullptr) return absl::ResourceExhaustedError("can't allocate a header");
  if (!text.empty() && sam_hdr_add_lines(merged.header.get(), text.data(), text.size()) != 0) {
    return absl::InvalidArgumentError(
        "the inputs' headers do not combine into one that parses (-v shows htslib's reason)");
  }
  return merged;
}

absl::StatusOr<MergedHeader> MergeHeaders(const std::vector<sam_hdr_t*>& headers,
                                          const std::vector<std::string>& names) {
  HeaderMerger merger;
  for (size_t i = 0; i < headers.size(); ++i) RETURN_IF_ERROR(merger.Add(headers[i], names[i]));
  return merger.Finish();
}

absl::Status RewriteIds(const IdTranslation& t, bam1_t* b) {
  if (!HasRenamedId(b, "RG", t.rg) && !HasRenamedId(b, "PG", t.pg)) return absl::OkStatus();
  if (absl::Status s = Retag("RG", t.rg, b); !s.ok()) return s;
  return Retag("PG", t.pg, b);
}

}  // namespace rocksort::loader
