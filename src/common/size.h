// File: common/size.h
// -----------------------------------------------------------------------------
// Byte sizes on command lines, parsed one way for the CLI and every tool:
// a decimal number with an optional K/M/G/T suffix, powers of 1024 and
// case-insensitive as samtools reads them ("1MB" and "1MiB" also mean 1M).
// Strict, because samtools' lenient parser turned "-m 2.5G" into 2 bytes and
// "-m G" into millions of temporary files (samtools#319, #636).
//
// Pure functions; thread-safe.
#ifndef ROCKSORT_COMMON_SIZE_H_
#define ROCKSORT_COMMON_SIZE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace rocksort {

// Parses "768M", "2.5G", "4096", "1T", "1MiB"... InvalidArgument for
// anything else (no digits, a sign, an exponent, other suffixes, spaces) or
// a value above 2^62.
absl::StatusOr<uint64_t> ParseSize(const std::string& text);

// `bytes` with the largest suffix that divides it exactly: "768M", "1000".
std::string FormatSize(uint64_t bytes);

}  // namespace rocksort

#endif  // ROCKSORT_COMMON_SIZE_H_
