#include "common/size.h"

#include <cmath>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rocksort {

absl::StatusOr<uint64_t> ParseSize(const std::string& text) {
  std::string number = text;
  uint64_t multiplier = 1;
  // "1MB" and "1MiB" mean 1M, powers of 1024 as samtools reads them.
  for (const char* unit : {"ib", "b"}) {
    const size_t n = std::strlen(unit);
    if (number.size() > n + 1 && absl::EndsWithIgnoreCase(number, unit) &&
        std::strchr("KkMmGgTt", number[number.size() - n - 1]) != nullptr) {
      number.resize(number.size() - n);
      break;
    }
  }
  if (!number.empty()) {
    switch (absl::ascii_toupper(static_cast<unsigned char>(number.back()))) {
      case 'K':
        multiplier = uint64_t{1} << 10;
        break;
      case 'M':
        multiplier = uint64_t{1} << 20;
        break;
      case 'G':
        multiplier = uint64_t{1} << 30;
        break;
      case 'T':
        multiplier = uint64_t{1} << 40;
        break;
      default:
        break;
    }
    if (multiplier != 1) number.pop_back();
  }
  // Only digits with at most one '.', at least one digit: rejects "", "G",
  // "-1", "1e9", "12Q", " 5".
  int dots = 0, digits = 0;
  for (char c : number) {
    if (c == '.')
      ++dots;
    else if (absl::ascii_isdigit(static_cast<unsigned char>(c)))
      ++digits;
    else
      digits = -1000;
  }
  double value = 0;
  if (digits <= 0 || dots > 1 || !absl::SimpleAtod(number, &value)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "invalid size \"%s\": expected a number with an optional K, M, G or T suffix "
        "(KB or KiB: the same)",
        text));
  }
  const double bytes = std::floor(value * static_cast<double>(multiplier));
  if (bytes > static_cast<double>(uint64_t{1} << 62)) {
    return absl::InvalidArgumentError(absl::StrFormat("invalid size \"%s\": too large", text));
  }
  return static_cast<uint64_t>(bytes);
}

std::string FormatSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"", "K", "M", "G", "T"};
  int unit = 0;
  while (unit < 4 && bytes >= 1024 && bytes % 1024 == 0) bytes /= 1024, ++unit;
  return absl::StrCat(bytes, kUnits[unit]);
}
}  // namespace rocksort
