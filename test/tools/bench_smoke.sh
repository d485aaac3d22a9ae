#!/usr/bin/env bash
# Smoke test of the benchmark harness, tools/bench.sh, on a 1 MiB generated
# input on the emulated HDD (-@ 1 -m 8M, --only all,rocksort-b,copy --verify
# --keep, rocksort-b given --b-args --no-progress): every command gets a
# result row with a peak-temp figure, each kept timeline is well formed,
# rocksort-b runs with its own arguments, and --verify finds both rocksorts'
# outputs identical to samtools'; then again with the input fed as SAM on stdin (--feed sam):
# rows with an after-EOF time, identical outputs. Timing is not checked: the figures come from real runs
# (docs/benchmarks.md).
#
# Usage: bench_smoke.sh ROCKSORT GEN_READS
# samtools 1.23.1, the harness's default peer, is used when it is installed
# at /opt/samtools-1.23.1; otherwise Debian's samtools stands in (the build
# and CI never need 1.23.1). Exit status 77 (skipped) when the harness cannot
# run here: it needs root, cgroup v1 blkio and memory hierarchies and a work
# directory on a block device, and only one instance may run at a time.
set -euo pipefail

rocksort=$1 gen=$2
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
readonly lock=/run/lock/rocksort-bench-hdd.lock  # HDD_LOCK of tools/hdd_emulation.sh
readonly peer=/opt/samtools-1.23.1/bin/samtools
readonly commands=(samtools rocksort rocksort-b copy)

# Prints why the test is skipped and exits 77.
skip() {
  echo "bench_smoke: skipped: $*"
  exit 77
}

# Prints the harness's output and message $1, and exits 1.
fail() {
  cat -- "$work/out.txt"
  echo "bench_smoke: $1" >&2
  exit 1
}

((EUID == 0)) || skip "not root"
[[ -e /sys/fs/cgroup/blkio/blkio.throttle.read_iops_device ]] || skip "no cgroup v1 blkio hierarchy"
[[ -e /sys/fs/cgroup/memory/memory.limit_in_bytes ]] || skip "no cgroup v1 memory hierarchy"
if [[ -e $lock ]] && ! flock -n "$lock" true; then
  skip "another benchmark holds $lock"
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/rocksort-bench-smoke.XXXXXX")"
trap 'rm -rf -- "$work"' EXIT
dev=$(stat -c '%Hd:%Ld' -- "$work")
[[ $dev != 0:* && -e /sys/dev/block/$dev ]] || skip "$work is not on a block device"

samtools_args=()
if [[ ! -x $peer ]]; then
  echo "bench_smoke: $peer not found; Debian's samtools is the baseline (--samtools /usr/bin/samtools)"
  samtools_args=(--samtools /usr/bin/samtools)
fi
"$repo/tools/bench.sh" --input gen:1M --threads 1 --mem 8M --disk hdd --only all,rocksort-b,copy \
  --verify --keep --workdir "$work" --rocksort "$rocksort" --b-args --no-progress --gen "$gen" \
  "${samtools_args[@]}" \
  >"$work/out.txt" 2>&1 || fail "the harness failed"

# A result row per command: 13 columns, the twelfth the peak temporary bytes.
[[ $(grep -E '^  command +run ' "$work/out.txt" | awk '{ print $12 }') == tmp_bytes ]] ||
  fail "no tmp_bytes column in the results"
for name in "${commands[@]}"; do
  awk -v n="$name" '$1 == n && $2 == 1 && NF == 13 && $3 ~ /^[0-9.]+$/ && $12 ~ /^[0-9]+$/ { ok = 1 }
    END { exit !ok }' "$work/out.txt" || fail "no result row for $name"
done
grep -Eq '^  rocksort +[0-9.]+ [0-9.]+ \([^)]+\) +[0-9.]+$' "$work/out.txt" ||
  fail "no wall-time ratios for rocksort"
# The kept timelines: the header, then rows of eleven numbers (a run this
# short may end before the first one-second sample).
for name in "${commands[@]}"; do
  timeline="$work/timeline.$name.1.tsv"
  [[ -f $timeline && $(head -n 1 -- "$timeline") == \
    $'seconds\treads_per_s\tread_MiB_per_s\tcores_busy\ttemp_MiB\tdisk_write_MiB_per_s\tcache_MiB\tdirty_MiB\twriteback_MiB\tanon_MiB\tlimit_hits_per_s' ]] ||
    fail "no timeline header in $timeline"
  awk -F '\t' 'NR > 1 { for (i = 1; i <= 11; i++) if (NF != 11 || $i !~ /^[0-9.]+$/) bad = 1 }
    END { exit bad }' "$timeline" || fail "malformed timeline row in $timeline"
  [[ -f $work/out.$name.bam ]] || fail "--keep did not keep out.$name.bam"
  [[ -f $work/log.$name.1.txt ]] || fail "--keep did not keep log.$name.1.txt"
done
grep -q "^  rocksort-b: .* with --no-progress\$" "$work/out.txt" ||
  fail "no version line for rocksort-b with its --b-args"
grep -q -- "--no-progress $work/input-1M-s1.bam\$" "$work/out.txt" ||
  fail "rocksort-b's command does not end with its --b-args and the input"
for name in rocksort rocksort-b; do
  grep -q "^  $name records: IDENTICAL" "$work/out.txt" ||
    fail "--verify did not report identical records for $name"
done
grep -q '^  rocksort header (without @PG): IDENTICAL' "$work/out.txt" ||
  fail "--verify did not report identical headers"
! grep -q 'DIFFERENT' "$work/out.txt" || fail "--verify reported a difference"
cat -- "$work/out.txt"

"$repo/tools/bench.sh" --input gen:1M --feed sam --threads 1 --mem 8M --disk hdd --only all \
  --verify --workdir "$work" --rocksort "$rocksort" --gen "$gen" "${samtools_args[@]}" \
  >"$work/out.txt" 2>&1 || fail "the harness failed with --feed sam"
[[ $(grep -E '^  command +run ' "$work/out.txt" | awk '{ print $14 }') == after_eof_s ]] ||
  fail "no after_eof_s column with --feed sam"
for name in samtools rocksort; do
  awk -v n="$name" '$1 == n && $2 == 1 && NF == 14 && $14 ~ /^[0-9.]+$/ { ok = 1 }
    END { exit !ok }' "$work/out.txt" || fail "no --feed sam result row for $name"
done
grep -Eq '^  rocksort +[0-9.]+ [0-9.]+ \([^)]+\) +[0-9.]+ [0-9.]+ \([^)]+\) *$' "$work/out.txt" ||
  fail "no after-EOF ratio for rocksort"
grep -q '^  rocksort records: IDENTICAL' "$work/out.txt" ||
  fail "--verify did not report identical records with --feed sam"
cat -- "$work/out.txt"
echo "bench_smoke: OK"
