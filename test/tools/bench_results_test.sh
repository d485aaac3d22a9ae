#!/usr/bin/env bash
# Test of tools/bench_results.awk, the harness's summary, on a fixed results
# file of two interleaved rounds (samtools, rocksort, copy): the medians, the
# ratios to samtools' and the copy's medians, and the run-by-run ratios to
# samtools' run of the same round with their range.
#
# Usage: bench_results_test.sh
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/rocksort-bench-results.XXXXXX")"
trap 'rm -rf -- "$work"' EXIT

# name run wall_s cpu_s rss_mib cg_mib read_mib read_reqs peak_rps write_mib
# tmp_bytes out_bytes after_eof_s
cat >"$work/results" <<'RESULTS'
samtools 1 230.00 465.9 182.8 448.0 8179.3 6966 160 7225.5 2975556870 2622491586 0
rocksort 1 184.00 341.4 115.0 448.0 6796.6 7814 165 6771.9 4473767209 2622491583 0
copy 1 161.00 300.0 5.8 448.0 2534.0 817 50 2520.0 0 2500000000 0
samtools 2 250.00 466.3 182.9 448.0 8182.7 7059 157 7225.5 2986042630 2622491586 0
rocksort 2 190.00 362.9 112.6 448.0 6799.2 7890 184 6772.1 4473791083 2622491583 0
copy 2 165.00 301.0 5.7 448.0 2538.0 824 52 2520.0 0 2500000000 0
RESULTS
awk -v runs=2 -v order="samtools rocksort copy" -v peer=samtools -v unthrottled=0 -v feed=file \
  -f "$repo/tools/bench_results.awk" "$work/results" >"$work/out"

# Prints the summary and message $1, and exits 1.
fail() {
  cat -- "$work/out"
  echo "bench_results_test: $1" >&2
  exit 1
}
expect() {
  grep -Eq -- "$1" "$work/out" || fail "no line matching: $1"
}

expect '^  rocksort +med +187\.00 '
expect '^  samtools +240\.00 1\.00 +1\.47$'
expect '^  rocksort +187\.00 0\.78 \(1\.28x faster\) +1\.15$'
expect '^  run by run: wall time divided by samtools'"'"' in the same round \(rounds 1\.\.2\):$'
expect '^  rocksort +0\.80 +0\.76 +range 0\.76\.\.0\.80$'
expect '^  copy +0\.70 +0\.66 +range 0\.66\.\.0\.70$'
! grep -Eq '^  samtools +[0-9.]+ +[0-9.]+ +range' "$work/out" || fail "samtools compared with itself"
echo "bench_results_test: OK"
