#!/usr/bin/env bash
# bench.sh: benchmark rocksort against `samtools sort`, side by side, on a
# synthetic BAM made by gen_reads. Run `tools/bench.sh -h` for usage.
#
# Both tools get the same thread count, memory flag and compression level, and
# each run is timed with GNU time (wall, user, sys, peak RSS). The input is
# generated once per (size, seed) and cached in the work directory; sort
# outputs and temporary files are removed on exit unless --keep is given.
# The code shared with tools/bench_hdd.sh is in tools/bench_lib.sh.

set -euo pipefail

readonly PROG="${0##*/}"

# shellcheck source-path=SCRIPTDIR source=bench_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"

usage() {
  cat <<EOF
Usage: $PROG [options] [-- EXTRA_ROCKSORT_ARGS...]

Sorts one synthetic BAM with 'samtools sort' and with rocksort and prints wall
time, CPU time, peak RSS and output size for each, plus rocksort/samtools
ratios.

Input:
  --size SIZE        compressed input size, passed to gen_reads --target-bytes
                     (K/M/G suffixes, powers of 1024) [256M]
  --seed INT         gen_reads seed [1]
  --gen PATH         gen_reads binary [./build/tools/gen_reads]

Sorting (the same values are given to both tools):
  --threads N        -@ N [2]
  --mem SIZE         -m SIZE; note samtools treats it as per thread [768M]
  --level L          -l L output compression level [each tool's default]
  --rocksort PATH    rocksort binary [./build/tools/rocksort]
  -- ARGS...         extra arguments for rocksort only, before the input

Runs:
  --runs K           repeat each tool K times; ratios use the medians [1]
  --verify           check that both outputs hold the same header (ignoring
                     @PG lines) and the same records in the same order; exit
                     status 1 if they differ
  --drop-caches      drop the page cache before each run (needs root)
  --workdir DIR      work directory [\${TMPDIR:-/tmp}/rocksort-bench]
  --keep             keep the sorted outputs (out.samtools.bam,
                     out.rocksort.bam in DIR)
  -h, --help         print this help and exit

The generated input (DIR/input-SIZE-sSEED.bam) is kept for later runs; delete
it to regenerate, for example after changing gen_reads.
EOF
}

# --- Options ------------------------------------------------------------------

# The shared options (--size, --seed, --threads, --mem, --workdir, --rocksort,
# --gen, --runs, --verify, --keep, --) are parsed by parse_options in
# bench_lib.sh; this script's own are stored here.
level=""
drop_caches=0
SCRIPT_FLAG_OPTIONS=(--drop-caches)
SCRIPT_VALUE_OPTIONS=(--level)
script_option() {
  case $1 in
    --drop-caches) drop_caches=1 ;;
    --level) level=$2 ;;
  esac
}

parse_options "$@"

check_input_options
[[ -z $level || $level =~ ^[0-9]$ ]] || die "--level: expected 0-9, got '$level'"
check_run_options
if ((drop_caches)) && ((EUID != 0)); then
  die "--drop-caches needs root (it writes /proc/sys/vm/drop_caches)"
fi

require_samtools_and_time
rocksort=$(resolve_binary rocksort "$rocksort" "build it, or pass --rocksort PATH")

# --- Work directory and cleanup -------------------------------------------------

prepare_workdir
out_st="$workdir/out.samtools.bam"
out_rs="$workdir/out.rocksort.bam"
scratch=$(mktemp -d "$workdir/.bench.XXXXXX")

# Both sorters' -T prefixes point into $scratch, so removing it removes their
# temporary files even after a crash, and nothing else in DIR is touched.
# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  rm -rf -- "$scratch" "$input.tmp.bam"
  if ((!keep)); then
    rm -f -- "$out_st" "$out_rs"
  fi
}
set_traps

# --- Machine ----------------------------------------------------------------------

print_machine

# --- Input ------------------------------------------------------------------------

prepare_input "$threads"

# --- Runs -------------------------------------------------------------------------

level_args=()
[[ -n $level ]] && level_args=(-l "$level")
st_cmd=("$samtools" sort -@ "$threads" -m "$mem" "${level_args[@]}"
  -T "$scratch/st" -o "$out_st" "$input")
rs_cmd=("$rocksort" -@ "$threads" -m "$mem" "${level_args[@]}"
  -T "$scratch/rs" -o "$out_rs" "${extra[@]}" "$input")

echo
echo "== Commands"
print_command "${st_cmd[@]}"
print_command "${rs_cmd[@]}"

# Runs one timed command. Appends "tool run wall cpu rss_mib out_bytes" to
# $scratch/results.
timed_run() {
  local tool=$1 run=$2 out=$3
  shift 3
  local timefile="$scratch/time.$tool.$run" log="$scratch/log.$tool.$run"
  rm -f -- "$out"
  sync
  if ((drop_caches)); then
    echo 3 >/proc/sys/vm/drop_caches
  fi
  if ! /usr/bin/time -f '%e %U %S %M %O' -o "$timefile" "$@" >"$log" 2>&1; then
    echo "$PROG: $tool failed (run $run); its output:" >&2
    tail -n 20 -- "$log" >&2
    exit 1
  fi
  # GNU time prints the format on the last line (earlier lines, if any,
  # are its own notes).
  local wall user sys rss written
  read -r wall user sys rss written < <(tail -n 1 -- "$timefile")
  [[ -f $out ]] || die "$tool exited 0 but wrote no $out"
  awk -v t="$tool" -v r="$run" -v w="$wall" -v u="$user" -v s="$sys" \
    -v m="$rss" -v wb="$written" -v b="$(stat -c %s -- "$out")" \
    'BEGIN { printf "%s %d %.2f %.2f %.1f %d %.1f\n", t, r, w, u + s, m / 1024, b,
             wb * 512 / 1048576 }' \
    >>"$scratch/results"
}

echo
echo "== Running ($runs run(s) each)"
for ((run = 1; run <= runs; run++)); do
  echo "  run $run: samtools"
  timed_run samtools "$run" "$out_st" "${st_cmd[@]}"
  echo "  run $run: rocksort"
  timed_run rocksort "$run" "$out_rs" "${rs_cmd[@]}"
done

# --- Report -----------------------------------------------------------------------

echo
echo "== Results"
awk -v runs="$runs" "$(awk_median)"'
  function ratio(label, rs, st, better, worse,    r) {
    if (st <= 0 || rs <= 0) { printf "  %-10s ratio n/a (a value is zero)\n", label; return }
    r = rs / st
    if (r <= 1) printf "  %-10s ratio %.2f (rocksort %.2fx %s)\n", label, r, 1 / r, better
    else        printf "  %-10s ratio %.2f (rocksort %.2fx %s)\n", label, r, r, worse
  }
  { name[NR] = $1; for (c = 2; c <= 7; c++) val[NR, c] = $c }
  END {
    printf "  %-9s %4s %9s %9s %12s %14s %10s\n", "tool", "run", "wall_s", "cpu_s", "peak_rss_MiB",
      "output_bytes", "write_MiB"
    for (i = 1; i <= NR; i++)
      printf "  %-9s %4d %9.2f %9.2f %12.1f %14d %10.1f\n", name[i], val[i, 2], val[i, 3], val[i, 4],
        val[i, 5], val[i, 6], val[i, 7]
    if (runs > 1) {
      print ""
      printf "  medians of %d runs:\n", runs
      for (k = 0; k < 2; k++) {
        t = k ? "rocksort" : "samtools"
        printf "  %-9s %4s %9.2f %9.2f %12.1f %14d %10.1f\n", t, "med", median(t, 3), median(t, 4),
          median(t, 5), median(t, 6), median(t, 7)
      }
    }
    print ""
    print "  rocksort/samtools:"
    ratio("wall", median("rocksort", 3), median("samtools", 3), "faster", "slower")
    ratio("CPU", median("rocksort", 4), median("samtools", 4), "less CPU", "more CPU")
    ratio("peak RSS", median("rocksort", 5), median("samtools", 5), "less memory", "more memory")
    ratio("output", median("rocksort", 6), median("samtools", 6), "smaller", "larger")
    ratio("written", median("rocksort", 7), median("samtools", 7), "fewer bytes", "more bytes")
    print "  (write_MiB: bytes written to files, temporary files and the output; GNU time %O x 512 B)"
  }' "$scratch/results"

# --- Verify -----------------------------------------------------------------------

status=0
if ((verify)); then
  echo
  echo "== Verify (last run's outputs)"
  check_bam "$out_st"
  check_bam "$out_rs"
  compare_headers "" "$out_st" "$out_rs" || status=1
  records_st=$(bam_records "$out_st" | md5sum)
  records_rs=$(bam_records "$out_rs" | md5sum)
  if [[ $records_st == "$records_rs" ]]; then
    echo "  records: IDENTICAL (${records_st%% *})"
  else
    # Second pass only on failure: cmp reports the first differing line,
    # which is the record number.
    first=$(first_difference "$out_st" "$out_rs")
    count_st=$("$samtools" view -c -@ "$threads" -- "$out_st")
    count_rs=$("$samtools" view -c -@ "$threads" -- "$out_rs")
    echo "  records: DIFFERENT (samtools $count_st, rocksort $count_rs records;" \
      "first difference at record ${first:-?})"
    if [[ -n $first ]]; then
      echo "    samtools: $(bam_records "$out_st" | sed -n "${first}{p;q}" | cut -c 1-150)"
      echo "    rocksort: $(bam_records "$out_rs" | sed -n "${first}{p;q}" | cut -c 1-150)"
    fi
    status=1
  fi
fi

exit "$status"
