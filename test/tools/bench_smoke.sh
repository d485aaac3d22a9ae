#!/usr/bin/env bash
# Smoke test of a benchmark harness (tools/bench.sh or tools/bench_hdd.sh) on
# a 1 MiB input: it runs every command (bench_hdd.sh: the sorts and the
# unsorted copy), prints a result row for rocksort, and its --verify finds
# rocksort's output identical to samtools'. Timing is not
# checked: the figures come from real runs (docs/benchmarks.md).
#
# Usage: bench_smoke.sh bench|bench_hdd ROCKSORT GEN_READS
# Exit status 77 (skipped) when bench_hdd.sh cannot run here: it needs root,
# cgroup v1 blkio and memory hierarchies and a work directory on a block
# device, and only one instance may run at a time.
set -euo pipefail

harness=$1 rocksort=$2 gen=$3
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
lock=/run/lock/rocksort-bench-hdd.lock  # bench_hdd.sh's LOCK

skip() {
  echo "bench_smoke: skipped: $*"
  exit 77
}

work="$(mktemp -d "${TMPDIR:-/tmp}/rocksort-bench-smoke.XXXXXX")"
trap 'rm -rf -- "$work"' EXIT

args=(--size 1M --threads 1 --mem 8M --verify --workdir "$work"
      --rocksort "$rocksort" --gen "$gen")
case $harness in
  bench)
    "$repo/tools/bench.sh" "${args[@]}" >"$work/out.txt" 2>&1 || {
      cat "$work/out.txt"; exit 1; }
    ;;
  bench_hdd)
    ((EUID == 0)) || skip "not root"
    [[ -e /sys/fs/cgroup/blkio/blkio.throttle.read_iops_device ]] ||
      skip "no cgroup v1 blkio hierarchy"
    [[ -e /sys/fs/cgroup/memory/memory.limit_in_bytes ]] || skip "no cgroup v1 memory hierarchy"
    [[ $(stat -c %Hd -- "$work") != 0 ]] || skip "$work is not on a block device"
    if [[ -e $lock ]] && ! flock -n "$lock" true; then
      skip "another bench_hdd.sh is running"
    fi
    "$repo/tools/bench_hdd.sh" "${args[@]}" --only all,copy --keep >"$work/out.txt" 2>&1 || {
      cat "$work/out.txt"; exit 1; }
    grep -Eq '^  copy +1 +[0-9.]+ ' "$work/out.txt" ||
      { cat "$work/out.txt"; echo "bench_smoke: no result row for copy" >&2; exit 1; }
    # The kept timeline: its header, then rows of four numbers (a run this
    # short may end before the first one-second sample).
    timeline="$work/timeline.rocksort.tsv"
    [[ $(head -n 1 -- "$timeline") == $'seconds\treads_per_s\tread_MiB_per_s\tcores_busy' ]] ||
      { echo "bench_smoke: no timeline header in $timeline" >&2; exit 1; }
    awk -F '\t' 'NR > 1 && (NF != 4 || $4 !~ /^[0-9.]+$/) { bad = 1 } END { exit bad }' \
      "$timeline" || { echo "bench_smoke: malformed timeline row in $timeline" >&2; exit 1; }
    ;;
  *)
    echo "bench_smoke: unknown harness '$harness'" >&2
    exit 2
    ;;
esac

cat "$work/out.txt"
grep -Eq '^  rocksort +1 +[0-9.]+ ' "$work/out.txt" ||
  { echo "bench_smoke: no result row for rocksort" >&2; exit 1; }
grep -q 'records: IDENTICAL' "$work/out.txt" ||
  { echo "bench_smoke: --verify did not report identical records" >&2; exit 1; }
if grep -q 'DIFFERENT' "$work/out.txt"; then
  echo "bench_smoke: --verify reported a difference" >&2
  exit 1
fi
echo "bench_smoke: $harness OK"
