#!/usr/bin/env bash
# bench.sh: benchmark rocksort against `samtools sort`, side by side, on a
# synthetic BAM made by gen_reads. Run `tools/bench.sh -h` for usage.
#
# Both tools get the same thread count, memory flag and compression level, and
# each run is timed with GNU time (wall, user, sys, peak RSS). The input is
# generated once per (size, seed) and cached in the work directory; sort
# outputs and temporary files are removed on exit unless --keep is given.

set -euo pipefail

readonly PROG="${0##*/}"

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

die() {
  printf '%s: %s\n' "$PROG" "$*" >&2
  exit 1
}

# Prints a command on one line, quoted so it can be pasted into a shell.
print_command() {
  local arg out=""
  for arg in "$@"; do
    out+="$(printf '%q' "$arg") "
  done
  printf '  %s\n' "${out% }"
}

# Resolves a binary given as a path or a bare name on PATH; dies if missing.
resolve_binary() {
  local what=$1 path=$2 hint=$3 found
  if [[ $path == */* ]]; then
    [[ -f $path && -x $path ]] ||
      die "$what binary not found or not executable: $path ($hint)"
    printf '%s\n' "$path"
  else
    found=$(command -v -- "$path") ||
      die "$what binary not found on PATH: $path ($hint)"
    printf '%s\n' "$found"
  fi
}

is_size() { [[ $1 =~ ^[0-9]+[KkMmGg]?$ ]]; }
is_count() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }

# --- Options ------------------------------------------------------------------

size=256M
seed=1
threads=2
mem=768M
level=""
workdir="${TMPDIR:-/tmp}/rocksort-bench"
rocksort=./build/tools/rocksort
gen=./build/tools/gen_reads
runs=1
verify=0
keep=0
drop_caches=0
extra=()

while (($# > 0)); do
  case $1 in
    -h | --help)
      usage
      exit 0
      ;;
    --verify) verify=1 ;;
    --keep) keep=1 ;;
    --drop-caches) drop_caches=1 ;;
    --)
      shift
      extra=("$@")
      break
      ;;
    --size | --seed | --threads | --mem | --level | --workdir | --rocksort | \
      --gen | --runs)
      (($# >= 2)) || die "option $1 needs an argument (see $PROG -h)"
      case $1 in
        --size) size=$2 ;;
        --seed) seed=$2 ;;
        --threads) threads=$2 ;;
        --mem) mem=$2 ;;
        --level) level=$2 ;;
        --workdir) workdir=$2 ;;
        --rocksort) rocksort=$2 ;;
        --gen) gen=$2 ;;
        --runs) runs=$2 ;;
      esac
      shift
      ;;
    *) die "unknown option '$1' (see $PROG -h)" ;;
  esac
  shift
done

is_size "$size" || die "--size: expected an integer with optional K/M/G, got '$size'"
[[ $seed =~ ^[0-9]+$ ]] || die "--seed: expected a non-negative integer, got '$seed'"
is_count "$threads" || die "--threads: expected a positive integer, got '$threads'"
is_size "$mem" || die "--mem: expected an integer with optional K/M/G, got '$mem'"
[[ -z $level || $level =~ ^[0-9]$ ]] || die "--level: expected 0-9, got '$level'"
is_count "$runs" || die "--runs: expected a positive integer, got '$runs'"
[[ -n $workdir ]] || die "--workdir: empty path"
if ((drop_caches)) && ((EUID != 0)); then
  die "--drop-caches needs root (it writes /proc/sys/vm/drop_caches)"
fi

samtools=$(resolve_binary samtools samtools "install samtools")
[[ -x /usr/bin/time ]] || die "GNU time not found at /usr/bin/time (apt-get install time)"
rocksort=$(resolve_binary rocksort "$rocksort" "build it, or pass --rocksort PATH")

# --- Work directory and cleanup -------------------------------------------------

mkdir -p -- "$workdir" || die "can't create work directory $workdir"
workdir=$(cd -- "$workdir" && pwd -P)
input="$workdir/input-$size-s$seed.bam"
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
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- Machine ----------------------------------------------------------------------

echo "== Machine"
echo "  nproc: $(nproc)"
echo "  cpu: $(LC_ALL=C lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)"
echo "  kernel: $(uname -sr)"
free -g | sed 's/^/  /'
echo "  $("$samtools" --version | head -n 1)"
echo "  workdir: $workdir ($(df -h --output=avail -- "$workdir" | tail -n 1 | tr -d ' ') free)"

# --- Input ------------------------------------------------------------------------

echo
echo "== Input"
if [[ -f $input ]] && "$samtools" quickcheck -- "$input"; then
  echo "  reusing cached $input"
else
  gen=$(resolve_binary gen_reads "$gen" "build it, or pass --gen PATH")
  gen_cmd=("$gen" -o "$input.tmp.bam" --target-bytes "$size" --seed "$seed"
    -@ "$threads")
  echo "  generating:"
  print_command "${gen_cmd[@]}"
  "${gen_cmd[@]}" || die "gen_reads failed"
  # Renamed only when complete, so an interrupted run never leaves a
  # truncated file that a later run would take for the cached input.
  mv -f -- "$input.tmp.bam" "$input"
fi
input_bytes=$(stat -c %s -- "$input")
input_records=$("$samtools" view -c -@ "$threads" -- "$input")
echo "  $input: $input_bytes bytes, $input_records records"

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
  if ! /usr/bin/time -f '%e %U %S %M' -o "$timefile" "$@" >"$log" 2>&1; then
    echo "$PROG: $tool failed (run $run); its output:" >&2
    tail -n 20 -- "$log" >&2
    exit 1
  fi
  # GNU time prints the format on the last line (earlier lines, if any,
  # are its own notes).
  local wall user sys rss
  read -r wall user sys rss < <(tail -n 1 -- "$timefile")
  [[ -f $out ]] || die "$tool exited 0 but wrote no $out"
  awk -v t="$tool" -v r="$run" -v w="$wall" -v u="$user" -v s="$sys" \
    -v m="$rss" -v b="$(stat -c %s -- "$out")" \
    'BEGIN { printf "%s %d %.2f %.2f %.1f %d\n", t, r, w, u + s, m / 1024, b }' \
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
awk -v runs="$runs" '
  function median(tool, col,    n, i, j, t, v) {
    n = 0
    for (i = 1; i <= NR; i++) if (name[i] == tool) v[++n] = val[i, col]
    for (i = 2; i <= n; i++)  # insertion sort; n is small
      for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  function ratio(label, rs, st, better, worse,    r) {
    if (st <= 0 || rs <= 0) { printf "  %-10s ratio n/a (a value is zero)\n", label; return }
    r = rs / st
    if (r <= 1) printf "  %-10s ratio %.2f (rocksort %.2fx %s)\n", label, r, 1 / r, better
    else        printf "  %-10s ratio %.2f (rocksort %.2fx %s)\n", label, r, r, worse
  }
  { name[NR] = $1; for (c = 2; c <= 6; c++) val[NR, c] = $c }
  END {
    printf "  %-9s %4s %9s %9s %12s %14s\n", "tool", "run", "wall_s", "cpu_s", "peak_rss_MiB", "output_bytes"
    for (i = 1; i <= NR; i++)
      printf "  %-9s %4d %9.2f %9.2f %12.1f %14d\n", name[i], val[i, 2], val[i, 3], val[i, 4], val[i, 5], val[i, 6]
    if (runs > 1) {
      print ""
      printf "  medians of %d runs:\n", runs
      for (k = 0; k < 2; k++) {
        t = k ? "rocksort" : "samtools"
        printf "  %-9s %4s %9.2f %9.2f %12.1f %14d\n", t, "med", median(t, 3), median(t, 4), median(t, 5), median(t, 6)
      }
    }
    print ""
    print "  rocksort/samtools:"
    ratio("wall", median("rocksort", 3), median("samtools", 3), "faster", "slower")
    ratio("CPU", median("rocksort", 4), median("samtools", 4), "less CPU", "more CPU")
    ratio("peak RSS", median("rocksort", 5), median("samtools", 5), "less memory", "more memory")
    ratio("output", median("rocksort", 6), median("samtools", 6), "smaller", "larger")
  }' "$scratch/results"

# --- Verify -----------------------------------------------------------------------

status=0
if ((verify)); then
  echo
  echo "== Verify (last run's outputs)"
  for f in "$out_st" "$out_rs"; do
    "$samtools" quickcheck -- "$f" || die "not a valid BAM: $f"
  done
  header_of() {
    "$samtools" view --no-PG -H -- "$1" | grep -v '^@PG' || true
  }
  records_of() {
    "$samtools" view --no-PG -@ "$threads" -- "$1"
  }
  header_st=$(header_of "$out_st" | md5sum)
  header_rs=$(header_of "$out_rs" | md5sum)
  if [[ $header_st == "$header_rs" ]]; then
    echo "  header (without @PG): IDENTICAL"
  else
    echo "  header (without @PG): DIFFERENT"
    diff <(header_of "$out_st") <(header_of "$out_rs") | head -n 10 | sed 's/^/    /' || true
    status=1
  fi
  records_st="$scratch/records.samtools.md5"
  records_rs="$scratch/records.rocksort.md5"
  records_of "$out_st" | md5sum >"$records_st"
  records_of "$out_rs" | md5sum >"$records_rs"
  if cmp -s -- "$records_st" "$records_rs"; then
    echo "  records: IDENTICAL ($(cut -d ' ' -f 1 "$records_st"))"
  else
    # Second pass only on failure: cmp reports the first differing line,
    # which is the record number.
    first=$(cmp -- <(records_of "$out_st") <(records_of "$out_rs") 2>&1 |
      sed -n 's/.* line \([0-9][0-9]*\).*/\1/p') || true
    count_st=$("$samtools" view -c -@ "$threads" -- "$out_st")
    count_rs=$("$samtools" view -c -@ "$threads" -- "$out_rs")
    echo "  records: DIFFERENT (samtools $count_st, rocksort $count_rs records;" \
      "first difference at record ${first:-?})"
    if [[ -n $first ]]; then
      echo "    samtools: $(records_of "$out_st" | sed -n "${first}{p;q}" | cut -c 1-150)"
      echo "    rocksort: $(records_of "$out_rs" | sed -n "${first}{p;q}" | cut -c 1-150)"
    fi
    status=1
  fi
fi

exit "$status"
