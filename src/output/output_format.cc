// The output format as samtools 1.23.1 `sort` chooses it. samtools builds
// the open mode "wb", lets htslib's sam_open_mode replace the "b" from the
// file name, appends the -l/-u digit (bam_sort.c, bam_sort), and opens it
// with sam_open_format and the -O format (hts.c, hts_open_format), which
// moves the b/c format letter to the end, replaces it with the -O format's
// letter and, for -O sam with BGZF compression, with "z"; hts_hopen then
// reads the letters and hts_open_format restores the exact -O format. What
// that amounts to is written out below, rule by rule.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "htslib/hts.h"
#include "output/output.h"

namespace rocksort::output {
namespace {

// htslib's HTS_MAX_EXT_LEN (hts_internal.h): an extension, its dot
// included, is at most this long.
constexpr size_t kMaxExtensionLength = 9;

// The extension as htslib 1.23.1's find_file_extension (hts_internal.h)
// finds it: after the last '.' of the last path component, before any
// "##idx##"; for a final ".gz" or ".bgz" (matched case-sensitively) the
// extension before it is included ("sam.gz"). None when there is no dot,
// or the extension is shorter than 2 or longer than 8 characters.
std::optional<std::string> FileExtension(absl::string_view fn) {
  const size_t delim_at = fn.find(HTS_IDX_DELIM);
  const size_t delim = delim_at == absl::string_view::npos ? fn.size() : delim_at;
  // `ext` walks back from the delimiter to a '.' or '/', stopping at 0.
  size_t ext = delim;
  auto walk_back = [&] {
    while (ext > 0 && (ext >= fn.size() || (fn[ext] != '.' && fn[ext] != '/'))) --ext;
  };
  walk_back();
  auto at = [&](size_t i) { return i < fn.size() ? fn[i] : '\0'; };
  if (at(ext) == '.' && ext > 0 &&
      ((delim - ext == 3 && fn.substr(ext + 1, 2) == "gz") ||
       (delim - ext == 4 && fn.substr(ext + 1, 3) == "bgz"))) {
    --ext;
    walk_back();
  }
  if (at(ext) != '.' || delim - ext > kMaxExtensionLength || delim - ext < 3) return std::nullopt;
  return std::string(fn.substr(ext + 1, delim - ext - 1));
}

// htslib's sam_open_mode for an extension: the mode letters, or null for
// one it does not know (samtools then keeps "b").
const char* ModeForExtension(absl::string_view ext) {
  struct Entry {
    const char* ext;
    const char* mode;
  };
  static constexpr Entry kModes[] = {
      {"bam", "b"},   {"cram", "c"}, {"sam", ""},        {"sam.gz", "z"},
      {"fastq", "f"}, {"fq", "f"},   {"fastq.gz", "fz"}, {"fq.gz", "fz"},
      {"fasta", "F"}, {"fa", "F"},   {"fasta.gz", "Fz"}, {"fa.gz", "Fz"},
  };
  for (const Entry& e : kModes) {
    if (absl::EqualsIgnoreCase(ext, e.ext)) return e.mode;
  }
  return nullptr;
}

// The format of mode letters, as hts_hopen reads them: b, then c, then f,
// then F; text (SAM) otherwise.
OutputKind KindOfMode(absl::string_view mode) {
  if (absl::StrContains(mode, 'b')) return OutputKind::kBam;
  if (absl::StrContains(mode, 'c')) return OutputKind::kCram;
  if (absl::StrContains(mode, 'f')) return OutputKind::kFastq;
  if (absl::StrContains(mode, 'F')) return OutputKind::kFasta;
  return OutputKind::kSam;
}

// The -O formats htslib's hts_parse_format knows. `sam_bgzf`: the format
// sets BGZF compression that hts_open_format honours (only SAM's).
struct NamedFormat {
  const char* name;
  OutputKind kind;
  bool sam_bgzf;
};
constexpr NamedFormat kNamedFormats[] = {
    {"sam", OutputKind::kSam, false},        {"sam.gz", OutputKind::kSam, true},
    {"bam", OutputKind::kBam, false},        {"cram", OutputKind::kCram, false},
    {"fastq", OutputKind::kFastq, false},    {"fq", OutputKind::kFastq, false},
    {"fastq.gz", OutputKind::kFastq, false}, {"fq.gz", OutputKind::kFastq, false},
    {"fasta", OutputKind::kFasta, false},    {"fa", OutputKind::kFasta, false},
    {"fasta.gz", OutputKind::kFasta, false}, {"fa.gz", OutputKind::kFasta, false},
};

// The options htslib 1.16's hts_opt_add knows (the version rocksort links;
// 1.23.1 adds fastq_umi and fastq_umi_regex), each in lower case or upper
// case as htslib matches them (store_md and store_nm in lower case only).
// `refusal` says why rocksort does not take one.
struct KnownOption {
  const char* name;
  bool upper_case_too;
  const char* refusal;
};
constexpr KnownOption kKnownOptions[] = {
    {"level", true, nullptr},
    {"reference", true, nullptr},
    {"version", true, nullptr},
    {"embed_ref", true, nullptr},
    {"no_ref", true, nullptr},
    {"seqs_per_slice", true, nullptr},
    {"bases_per_slice", true, nullptr},
    {"slices_per_container", true, nullptr},
    {"multi_seq_per_slice", true, nullptr},
    {"pos_delta", true, nullptr},
    {"ignore_md5", true, nullptr},
    {"use_bzip2", true, nullptr},
    {"use_rans", true, nullptr},
    {"use_lzma", true, nullptr},
    {"use_tok", true, nullptr},
    {"use_fqz", true, nullptr},
    {"use_arith", true, nullptr},
    {"lossy_names", true, nullptr},
    {"store_md", false, nullptr},
    {"store_nm", false, nullptr},
    {"decode_md", true, nullptr},
    {"required_fields", true, nullptr},
    {"name_prefix", true, nullptr},
    {"fast", true, nullptr},
    {"normal", true, nullptr},
    {"small", true, nullptr},
    {"archive", true, nullptr},
    {"block_size", true, nullptr},
    {"cache_size", true, nullptr},
    {"fastq_aux", true, nullptr},
    {"fastq_barcode", true, nullptr},
    {"fastq_rnum", true, nullptr},
    {"fastq_casava", true, nullptr},
    {"fastq_name2", true, nullptr},
    {"nthreads", true, "threads are set with -@"},
    {"filter", true, "it would leave records out, and rocksort writes every record it sorts"},
    {"verbosity", true, "it changes htslib's logging for the whole process; use -v"},
};

// The option's name: the text before any '='.
absl::string_view OptionName(absl::string_view option) {
  return option.substr(0, option.find('='));
}

absl::Status CheckLevel(const OutputFormatRequest::Option& option) {
  const size_t eq = option.text.find('=');
  if (eq == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: give the level as level=N, N in 0..9", option.origin));
  }
  const absl::string_view value = absl::string_view(option.text).substr(eq + 1);
  // htslib reads the value with strtol(..., 0): samtools takes level=09 as
  // octal 0 (an uncompressed file), not 9. Refused rather than guessed.
  if (value.size() > 1 && value[0] == '0') {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: write the level without a leading zero (samtools would read "
                        "\"%s\" as an octal number)",
                        option.origin, value));
  }
  int level = 0;
  if (value.empty() ||
      !std::all_of(value.begin(), value.end(),
                   [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) ||
      !absl::SimpleAtoi(value, &level) || level > 9) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: invalid level \"%s\": expected an integer in 0..9", option.origin, value));
  }
  return absl::OkStatus();
}

absl::Status CheckOption(const OutputFormatRequest::Option& option) {
  const absl::string_view name = OptionName(option.text);
  const KnownOption* known = nullptr;
  for (const KnownOption& k : kKnownOptions) {
    if (name == k.name || (k.upper_case_too && name == absl::AsciiStrToUpper(k.name))) {
      known = &k;
      break;
    }
  }
  if (known == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: unknown output format option \"%s\" (htslib's names, in lower or upper case: "
        "level=N, reference=FILE, version=3.0, embed_ref=1, no_ref=1, ...)",
        option.origin, name));
  }
  if (known->refusal != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: rocksort does not take the output format option %s: %s", option.origin,
                        known->name, known->refusal));
  }
  if (absl::string_view(known->name) == "level") return CheckLevel(option);
  // htslib's own parsing has the last word (cache_size's suffix, say).
  hts_opt* parsed = nullptr;
  const int added = hts_opt_add(&parsed, option.text.c_str());
  hts_opt_free(parsed);
  if (added != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: htslib does not take \"%s\"", option.origin, option.text));
  }
  return absl::OkStatus();
}

}  // namespace

int OutputFormat::EffectiveLevel() const {
  int effective = level;
  for (const std::string& option : options) {
    const std::string name = absl::AsciiStrToLower(OptionName(option));
    if (name == "level") {
      int value = -1;
      if (absl::SimpleAtoi(absl::string_view(option).substr(6), &value)) effective = value;
    } else if (name == "fast") {
      effective = 2;
    } else if (name == "normal") {
      effective = -1;
    } else if (name == "small" || name == "archive") {
      // htslib sets 10 and 12 (libdeflate levels); its BGZF compressor
      // treats every level above 9 as 9.
      effective = 9;
    }
  }
  return effective;
}

std::string OutputFormat::HtsMode() const {
  std::string mode = "w";
  switch (kind) {
    case OutputKind::kBam:
      mode += 'b';
      break;
    case OutputKind::kCram:
      mode += 'c';
      break;
    case OutputKind::kFastq:
      mode += 'f';
      break;
    case OutputKind::kFasta:
      mode += 'F';
      break;
    case OutputKind::kSam:
      break;
  }
  if (bgzf) mode += 'z';
  if (level >= 0) mode += static_cast<char>('0' + (level < 9 ? level : 9));
  return mode;
}

std::string OutputFormat::Describe() const {
  const char* name = "BAM";
  switch (kind) {
    case OutputKind::kBam:
      return "BAM";
    case OutputKind::kCram:
      return "CRAM";
    case OutputKind::kSam:
      name = "SAM";
      break;
    case OutputKind::kFastq:
      name = "FASTQ";
      break;
    case OutputKind::kFasta:
      name = "FASTA";
      break;
  }
  return bgzf ? absl::StrCat("BGZF-compressed ", name) : name;
}

bool OutputFormat::indexable() const {
  return kind == OutputKind::kBam || kind == OutputKind::kCram ||
         (kind == OutputKind::kSam && bgzf);
}

std::string OutputFormat::reference() const {
  std::string reference;
  for (const std::string& option : options) {
    if (absl::EqualsIgnoreCase(OptionName(option), "reference") &&
        option.size() > std::strlen("reference=")) {
      reference = option.substr(std::strlen("reference="));
    }
  }
  return reference;
}

absl::StatusOr<OutputFormat> ResolveOutputFormat(const OutputFormatRequest& request) {
  OutputFormat format;
  // The name: samtools starts from "wb" and sam_open_mode replaces the "b"
  // when it knows the extension.
  const char* mode = "b";
  if (const std::optional<std::string> ext = FileExtension(request.path)) {
    if (const char* m = ModeForExtension(*ext)) mode = m;
  }
  format.kind = KindOfMode(mode);
  bool compressed = absl::StrContains(mode, 'z');

  // -O. hts_parse_format reads the name lower-cased and, through a 9-byte
  // buffer, only its first 8 characters.
  if (!request.format.empty() || !request.format_origin.empty()) {
    const std::string name = absl::AsciiStrToLower(absl::string_view(request.format).substr(0, 8));
    const NamedFormat* named = nullptr;
    for (const NamedFormat& f : kNamedFormats) {
      if (name == f.name) named = &f;
    }
    if (named == nullptr) {
      const bool variant = name == "vcf" || name == "bcf";
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: %s \"%s\" (expected sam, sam.gz, bam, cram, fastq or fasta)",
          request.format_origin.empty() ? "-O" : request.format_origin,
          variant ? "not an alignment format:" : "unknown output format", request.format));
    }
    format.kind = named->kind;
    // parse_sam_global_opt (sam_opts.c): "SAM format with compression
    // enabled implies SAM.bgzf", compression being any level option.
    bool level_option = false;
    for (const OutputFormatRequest::Option& option : request.options) {
      level_option |= absl::EqualsIgnoreCase(OptionName(option.text), "level");
    }
    if (named->kind == OutputKind::kSam && (named->sam_bgzf || level_option)) compressed = true;
  }
  format.bgzf = compressed && format.kind != OutputKind::kBam && format.kind != OutputKind::kCram;

  if (request.level < -1 || request.level > 9) {
    return absl::InvalidArgumentError(
        absl::StrFormat("compression level %d is not in 0..9", request.level));
  }
  format.level = request.level;
  for (const OutputFormatRequest::Option& option : request.options) {
    if (option.text.empty()) continue;  // "-O bam," as samtools allows.
    if (absl::Status s = CheckOption(option); !s.ok()) return s;
    format.options.push_back(option.text);
  }
  return format;
}

}  // namespace rocksort::output
