#!/usr/bin/env bash
# bench.sh: the benchmark harness. Sorts one BAM with samtools sort 1.23.1
# (the peer, and the baseline of every ratio) and rocksort, optionally also
# with Debian's samtools 1.16.1 and rocksort --no-compaction, and copies it
# unsorted (samtools view -b: the floor no sorter beats). Each run is
# measured in its own cgroups after the page cache was dropped, on an
# emulated spinning disk or the unthrottled one (tools/hdd_emulation.sh;
# docs/hdd_emulation.md). Run `tools/bench.sh -h` for usage. Its input and
# report sections are in tools/bench_lib.sh.

set -euo pipefail

readonly PROG=bench.sh
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
readonly REPO
readonly MIB=1048576
readonly MEM_SLACK_MIB=384  # default memory limit = sort budget + this
readonly PEER_VERSION=1.23.1
readonly PEER_SAMTOOLS=/opt/samtools-$PEER_VERSION/bin/samtools
readonly PEER_APT="apt-get install -y build-essential autoconf zlib1g-dev libbz2-dev liblzma-dev libdeflate-dev libncurses-dev"
readonly PEER_BUILD="bash ../shared/peers/build_samtools.sh /opt/samtools-$PEER_VERSION"
readonly REALISTIC=$REPO/tools/realistic/make_realistic_bam.sh
# gen_reads -@ for generated inputs: it is part of the @PG line, so of the
# cached input's bytes; fixed so the input does not depend on --threads.
readonly GEN_THREADS=2

# shellcheck source-path=SCRIPTDIR source=hdd_emulation.sh
source "$REPO/tools/hdd_emulation.sh"
# The input and the report sections.
# shellcheck source-path=SCRIPTDIR source=bench_lib.sh
source "$REPO/tools/bench_lib.sh"

# --- Options and their defaults -------------------------------------------------

input_spec=realistic
feed="file"
reference=""
gen=$REPO/build/tools/gen_reads
only=all
samtools_opt=""  # --samtools as given; empty means the peer's default path
debian_samtools=/usr/bin/samtools
rocksort=$REPO/build/tools/rocksort
rocksort_b=""  # --rocksort-b as given; empty means --rocksort
b_args=""
threads=2
mem=768M
order=""
level=""
disk=hdd
iops=150
bps=180M
mem_limit=""
runs=1
verify=0
workdir=${TMPDIR:-/tmp}/rocksort-bench
keep=0
extra=()

# Prints the help text on stdout, defaults from the variables above.
usage() {
  cat <<EOF
Usage: $PROG [options] [-- EXTRA_ROCKSORT_ARGS...]

Sorts one BAM with 'samtools sort' (samtools $PEER_VERSION, the baseline) and
rocksort, each run in fresh cgroups after the page cache was dropped, on an
emulated spinning disk or the unthrottled one. Prints the machine, versions,
input and exact commands, then per run: wall and CPU time, peak RSS, cgroup
memory, disk reads, bytes written, peak temporary space and output size;
then each command's median wall time relative to samtools and to the
unsorted copy, and with --runs K > 1 each run's wall time relative to
samtools' run of the same round. Needs root and cgroup v1 blkio and
memory hierarchies (docs/hdd_emulation.md).

Input:
  --input WHAT       one of [$input_spec]:
                     realistic[:TEMPLATES[:SEED]]  the realistic BAM of
                       tools/realistic/make_realistic_bam.sh (built once and
                       cached, 20-45 minutes; its defaults when omitted)
                     gen:SIZE[:SEED]  a synthetic BAM of SIZE compressed
                       bytes (K/M/G) made by gen_reads and cached in DIR as
                       input-SIZE-sSEED.bam [seed 1]
                     FILE  an existing SAM, BAM or CRAM
  --feed HOW         file: every command reads the input file [$feed]
                     sam: the input as SAM text on stdin, from cat of a
                       SAM copy made once (DIR/NAME.sam), as from an
                       aligner; adds after_eof_s, the time from the end
                       of stdin to the command's exit, and its ratios
  --reference FASTA  reference for a CRAM input, given to every command [none]
  --gen PATH         gen_reads binary [$gen]

Commands:
  --only LIST        comma-separated commands, run in this order [$only]:
                       samtools       'samtools sort' of --samtools ($PEER_VERSION)
                       samtools-1.16  'samtools sort' of --debian-samtools
                       rocksort       rocksort with the arguments after --
                       rocksort-nocompact  the same with --no-compaction
                       rocksort-b     --rocksort-b with the arguments after --
                                      and --b-args: the B side of an A/B
                       copy           'samtools view -b' of the input
                                      (--samtools): decoding and re-encoding
                                      without sorting, the floor
                       all            samtools,rocksort
  --samtools PATH    samtools $PEER_VERSION: the peer, the baseline of the ratios,
                     and the samtools of copy, the input checks and --verify;
                     another version only when given explicitly
                     [$PEER_SAMTOOLS]
  --debian-samtools PATH  samtools of samtools-1.16 [$debian_samtools]
  --rocksort PATH    rocksort binary [$rocksort]
  --rocksort-b PATH  rocksort binary of rocksort-b [--rocksort]
  --b-args 'ARGS'    extra arguments for rocksort-b only, split at spaces,
                     after those after -- (e.g. --progress) [none]

Sorting (the same for every command):
  --threads N        -@ N [$threads]
  --mem SIZE         -m SIZE, memory per thread (K/M/G, powers of 1024) [$mem]
  --order 'FLAGS'    sort-order flags for every sort, split at spaces, e.g.
                     -n, -N, '-t RG', --template-coordinate [coordinate]
  --level L          -l L output compression level, copy included
                     [each tool's default]
  -- ARGS...         extra arguments for rocksort, rocksort-nocompact and
                     rocksort-b, before the input

Disk (root and cgroup v1 in both modes):
  --disk MODE        [$disk]
                       hdd          emulated spinning disk: reads from the
                                    disk under DIR throttled to --iops and
                                    --bps, read_ahead_kb $HDD_RA_KB during each run
                       unthrottled  no throttle, read_ahead_kb left alone
                     both: a memory cgroup per run (--mem-limit) and the page
                     cache dropped before each run; writes are never throttled
  --iops N           hdd: read requests per second [$iops]
  --bps SIZE         hdd: read bytes per second (K/M/G) [$bps]
  --mem-limit SIZE   memory.limit_in_bytes of each run's cgroup (K/M/G)
                     [threads x mem + ${MEM_SLACK_MIB}M]

Runs:
  --runs K           run every command K times, interleaved; the summary
                     uses the medians [$runs]
  --verify           check that every sort's output holds the same header
                     (without @PG lines) and the same records in the same
                     order as the first sort's (copy is not compared); exit
                     status 1 if one differs
  --workdir DIR      work directory: generated inputs, and a private
                     directory for outputs and temporary files, removed on
                     exit; must be on the disk to emulate
                     [\${TMPDIR:-/tmp}/rocksort-bench]
  --keep             keep the last run's outputs as DIR/out.NAME.bam, and
                     for every run what the command printed as
                     DIR/log.NAME.RUN.txt (pass -v to rocksort after -- for
                     its statistics) and its timeline as
                     DIR/timeline.NAME.RUN.tsv: per ~1 s, read requests/s,
                     MiB/s read, cores busy, temporary MiB, MiB/s the
                     whole disk wrote, the memory cgroup's page cache,
                     dirty, writeback and anonymous MiB, and its limit
                     hits/s
  -h, --help         print this help and exit
EOF
}

# --- Helpers -----------------------------------------------------------------------

# Prints "bench.sh: MESSAGE" on stderr and exits 1.
die() {
  printf '%s: %s\n' "$PROG" "$*" >&2
  exit 1
}

# Prints a command on one line, indented, quoted where needed so it can be
# pasted into a shell.
print_command() {
  local arg out=""
  for arg in "$@"; do
    if [[ $arg =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then
      out+="$arg "
    else
      out+="$(printf '%q' "$arg") "
    fi
  done
  printf '  %s\n' "${out% }"
}

# Prints the absolute path of binary $2 (a path, or a name on PATH); dies
# naming it as $1, with hint $3, if it is missing.
resolve_binary() {
  local what=$1 path=$2 hint=$3 found
  if [[ $path == */* ]]; then
    [[ -f $path && -x $path ]] || die "$what not found or not executable: $path ($hint)"
    realpath -- "$path"
  else
    found=$(command -v -- "$path") || die "$what not found on PATH: $path ($hint)"
    realpath -- "$found"
  fi
}

# True if $1 is a size: digits with an optional K, M or G.
is_size() { [[ $1 =~ ^[0-9]+[KkMmGg]?$ ]]; }

# True if $1 is a positive integer.
is_count() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }

# Prints size $1 (K/M/G = powers of 1024) in bytes.
to_bytes() {
  local n=${1%[KkMmGg]} mult=1
  case $1 in
    *[Kk]) mult=1024 ;;
    *[Mm]) mult=$MIB ;;
    *[Gg]) mult=$((1024 * MIB)) ;;
  esac
  printf '%d\n' "$((10#$n * mult))"
}

# Prints $1 bytes in GiB, or in MiB below 1 GiB, with two decimals.
human_bytes() {
  awk -v b="$1" 'BEGIN { if (b >= 1073741824) printf "%.2f GiB", b / 1073741824
                         else printf "%.2f MiB", b / 1048576 }'
}

# Prints the first line of `$1 --version`.
version_of() { "$1" --version 2>/dev/null | head -n 1; }

# Prints the bytes in the files below directory $1 (apparent sizes, as
# du -sb counts them, without the directories themselves); files deleted
# while it counts are skipped.
dir_bytes() {
  { find "$1" -type f -printf '%s\n' 2>/dev/null || true; } |
    awk '{ s += $1 } END { printf "%.0f\n", s }'
}

# True if command $1 is in the list of commands to run.
runs_command() { [[ " ${names[*]} " == *" $1 "* ]]; }

# --- Options -----------------------------------------------------------------------

# Parses the command line into the option variables; --opt=VALUE and
# --opt VALUE are both accepted.
parse_options() {
  local opt value
  while (($# > 0)); do
    opt=$1
    case $opt in
      -h | --help)
        usage
        exit 0
        ;;
      --verify) verify=1 ;;
      --keep) keep=1 ;;
      --)
        shift
        extra=("$@")
        return 0
        ;;
      --*=*)
        value=${opt#*=}
        opt=${opt%%=*}
        set_option "$opt" "$value"
        ;;
      --*)
        set_option "$opt" "${2-}"  # dies if $opt is unknown
        (($# >= 2)) || die "option $opt needs a value (see $PROG -h)"
        shift
        ;;
      -*) die "unknown option '$opt' (see $PROG -h)" ;;
      *) die "unexpected argument '$opt': the input is given with --input (see $PROG -h)" ;;
    esac
    shift
  done
}

# Stores the value $2 of option $1; dies on an unknown option.
set_option() {
  case $1 in
    --input) input_spec=$2 ;;
    --feed) feed=$2 ;;
    --reference) reference=$2 ;;
    --gen) gen=$2 ;;
    --only) only=$2 ;;
    --samtools) samtools_opt=$2 ;;
    --debian-samtools) debian_samtools=$2 ;;
    --rocksort) rocksort=$2 ;;
    --rocksort-b) rocksort_b=$2 ;;
    --b-args) b_args=$2 ;;
    --threads) threads=$2 ;;
    --mem) mem=$2 ;;
    --order) order=$2 ;;
    --level) level=$2 ;;
    --disk) disk=$2 ;;
    --iops) iops=$2 ;;
    --bps) bps=$2 ;;
    --mem-limit) mem_limit=$2 ;;
    --runs) runs=$2 ;;
    --workdir) workdir=$2 ;;
    *) die "unknown option '$1' (see $PROG -h)" ;;
  esac
}

# Validates the options; sets the input_* variables (check_input_spec),
# names (the commands, in order), sorts (those whose outputs --verify
# compares), order_args, bps_bytes and mem_limit_bytes.
check_options() {
  local word words w item
  check_input_spec
  [[ $feed == file || $feed == sam ]] || die "--feed: expected file or sam, got '$feed'"
  is_count "$threads" || die "--threads: expected a positive integer, got '$threads'"
  is_size "$mem" || die "--mem: expected an integer with optional K/M/G, got '$mem'"
  [[ -z $level || $level =~ ^[0-9]$ ]] || die "--level: expected 0-9, got '$level'"
  [[ $disk == hdd || $disk == unthrottled ]] ||
    die "--disk: expected hdd or unthrottled, got '$disk'"
  is_count "$iops" || die "--iops: expected a positive integer, got '$iops'"
  if ! is_size "$bps" || (($(to_bytes "$bps") == 0)); then
    die "--bps: expected a positive integer with optional K/M/G, got '$bps'"
  fi
  bps_bytes=$(to_bytes "$bps")
  if [[ -n $mem_limit ]]; then
    if ! is_size "$mem_limit" || (($(to_bytes "$mem_limit") == 0)); then
      die "--mem-limit: expected a positive integer with optional K/M/G, got '$mem_limit'"
    fi
    mem_limit_bytes=$(to_bytes "$mem_limit")
  else
    mem_limit_bytes=$((threads * $(to_bytes "$mem") + MEM_SLACK_MIB * MIB))
  fi
  is_count "$runs" || die "--runs: expected a positive integer, got '$runs'"
  [[ -n $workdir ]] || die "--workdir: empty path"
  read -r -a order_args <<<"$order"
  read -r -a b_arg_words <<<"$b_args"
  # --only as a list of commands, "all" expanded, each once, in order.
  names=()
  IFS=, read -r -a words <<<"$only"
  ((${#words[@]} > 0)) || die "--only: expected a list of commands, got '$only'"
  for word in "${words[@]}"; do
    case $word in
      all) w=(samtools rocksort) ;;
      samtools | samtools-1.16 | rocksort | rocksort-nocompact | rocksort-b | copy) w=("$word") ;;
      *) die "--only: expected samtools, samtools-1.16, rocksort, rocksort-nocompact, rocksort-b, copy or all, got '$word'" ;;
    esac
    for item in "${w[@]}"; do
      runs_command "$item" || names+=("$item")
    done
  done
  sorts=()
  for word in "${names[@]}"; do
    [[ $word == copy ]] || sorts+=("$word")
  done
  ((verify == 0 || ${#sorts[@]} > 0)) || die "--verify needs a sort in --only; copy is not compared"
}

# Sets samtools (the peer), and debian_samtools and rocksort when they run
# (absolute paths); dies with instructions if one is missing.
resolve_binaries() {
  if [[ -n $samtools_opt ]]; then
    samtools=$(resolve_binary samtools "$samtools_opt" "pass --samtools PATH")
  elif [[ -f $PEER_SAMTOOLS && -x $PEER_SAMTOOLS ]]; then
    samtools=$PEER_SAMTOOLS
  else
    die "$(printf '%s\n' \
      "samtools $PEER_VERSION, the peer and the baseline of every ratio, is not at $PEER_SAMTOOLS." \
      "Build it (about 4 minutes) from the repository root, $REPO:" "  $PEER_APT" "  $PEER_BUILD" \
      "or pass --samtools PATH (--samtools /usr/bin/samtools: Debian's samtools as the baseline, for a quick check).")"
  fi
  if runs_command samtools-1.16; then
    debian_samtools=$(resolve_binary "samtools for samtools-1.16" "$debian_samtools" \
      "apt-get install samtools, or pass --debian-samtools PATH")
  fi
  if runs_command rocksort || runs_command rocksort-nocompact; then
    rocksort=$(resolve_binary rocksort "$rocksort" "build it, or pass --rocksort PATH")
    if runs_command rocksort-nocompact &&
      ! "$rocksort" --help 2>/dev/null | grep -q -- '--no-compaction'; then
      die "$rocksort --help does not list --no-compaction; can't run rocksort-nocompact"
    fi
  fi
  if runs_command rocksort-b; then
    rocksort_b=$(resolve_binary rocksort-b "${rocksort_b:-$rocksort}" "build it, or pass --rocksort-b PATH")
  fi
  [[ -x /usr/bin/time ]] || die "GNU time not found at /usr/bin/time (apt-get install time)"
}

# --- Commands --------------------------------------------------------------------------

# Fills the array cmd with command $1's words. Its output goes to
# $scratch/out.$1.bam, its temporary files into $scratch/tmp.$1 (made
# afresh for each run).
make_command() {
  local name=$1
  local out="$scratch/out.$name.bam" tmp="$scratch/tmp.$name"
  local common=(-@ "$threads" "${level_args[@]}" "${ref_args[@]}")
  local input=$input
  [[ $feed == file ]] || input=-
  case $name in
    samtools)
      cmd=("$samtools" sort "${common[@]}" -m "$mem" "${order_args[@]}" -T "$tmp/st" -o "$out" "$input") ;;
    samtools-1.16)
      cmd=("$debian_samtools" sort "${common[@]}" -m "$mem" "${order_args[@]}" -T "$tmp/st" -o "$out"
        "$input") ;;
    rocksort)
      cmd=("$rocksort" "${common[@]}" -m "$mem" "${order_args[@]}" -T "$tmp" -o "$out" "${extra[@]}"
        "$input") ;;
    rocksort-nocompact)
      cmd=("$rocksort" "${common[@]}" -m "$mem" "${order_args[@]}" -T "$tmp" -o "$out"
        --no-compaction "${extra[@]}" "$input") ;;
    rocksort-b)
      cmd=("$rocksort_b" "${common[@]}" -m "$mem" "${order_args[@]}" -T "$tmp" -o "$out" "${extra[@]}"
        "${b_arg_words[@]}" "$input") ;;
    copy)
      cmd=("$samtools" view "${common[@]}" -b -o "$out" "$input") ;;
  esac
  if [[ $feed == sam ]]; then
    # The times stdin ended and the command exited, for after_eof_s.
    # shellcheck disable=SC2016  # expanded by the inner shell
    cmd=(bash -c 'set -o pipefail; { cat -- "$1"; echo "$EPOCHREALTIME" >"$2"; } | "${@:4}"
      s=$?; echo "$EPOCHREALTIME" >"$3"; exit "$s"' feed "$sam_input" "$scratch/eof.$name"
      "$scratch/exit.$name" "${cmd[@]}")
  fi
}

# --- Runs ----------------------------------------------------------------------------

# Runs command $1 (run $2) in fresh cgroups under GNU time, sampling its
# counters and temporary space about once a second, and appends
# "name run wall cpu rss_mib cg_mib read_mib read_reqs peak_rps write_mib
# tmp_bytes out_bytes after_eof_s" to $scratch/results (after_eof_s 0
# without --feed sam).
measured_run() {
  local name=$1 run=$2 cmd status=0
  local timefile="$scratch/time.$name.$run" log="$scratch/log.$name.$run"
  local timeline="$scratch/timeline.$name.$run"
  local out="$scratch/out.$name.bam" tmp="$scratch/tmp.$name"
  make_command "$name"
  rm -f -- "$out" "$scratch/eof.$name" "$scratch/exit.$name"
  rm -rf -- "$tmp"
  mkdir -p -- "$tmp"
  hdd_begin_run
  (
    hdd_join || exit 125
    exec /usr/bin/time -f '%e %U %S %M %O' -o "$timefile" "${cmd[@]}" >"$log" 2>&1
  ) &
  child=$!
  # The timeline shows which phase waits for the disk (requests at --iops,
  # cores idle) and which for the CPU; the peak of the temporary space is
  # taken from the same samples.
  local start t0 t1 n0 b0 c0 w0 h0 rate peak_rps=0 tmp_now tmp_peak=0
  printf 'seconds\treads_per_s\tread_MiB_per_s\tcores_busy\ttemp_MiB\tdisk_write_MiB_per_s' >"$timeline"
  printf '\tcache_MiB\tdirty_MiB\twriteback_MiB\tanon_MiB\tlimit_hits_per_s\n' >>"$timeline"
  start=$EPOCHREALTIME
  t0=$start
  hdd_sample
  n0=$hdd_reqs b0=$hdd_bytes c0=$hdd_ticks w0=$hdd_written h0=$hdd_hits
  while kill -0 "$child" 2>/dev/null; do
    sleep 1
    t1=$EPOCHREALTIME
    hdd_sample
    tmp_now=$(dir_bytes "$tmp")
    ((tmp_now > tmp_peak)) && tmp_peak=$tmp_now
    rate=$(awk -v n="$((hdd_reqs - n0))" -v a="$t0" -v b="$t1" \
      'BEGIN { printf "%d", (b > a ? n / (b - a) : 0) }')
    ((rate > peak_rps)) && peak_rps=$rate
    awk -v s="$start" -v a="$t0" -v b="$t1" -v n="$((hdd_reqs - n0))" -v m="$((hdd_bytes - b0))" \
      -v c="$((hdd_ticks > c0 ? hdd_ticks - c0 : 0))" -v hz="$HDD_CLK_TCK" -v t="$tmp_now" \
      -v w="$((hdd_written - w0))" -v h="$((hdd_hits - h0))" -v mem="$hdd_mem" \
      'BEGIN { d = b - a; split(mem, g, " ")
               if (d > 0) printf "%.1f\t%.0f\t%.1f\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\n",
                 b - s, n / d, m / d / 1048576, c / hz / d, t / 1048576, w / d / 1048576,
                 g[1] / 1048576, g[2] / 1048576, g[3] / 1048576, g[4] / 1048576, h / d }' >>"$timeline"
    t0=$t1 n0=$hdd_reqs b0=$hdd_bytes c0=$hdd_ticks w0=$hdd_written h0=$hdd_hits
  done
  wait "$child" || status=$?
  child=""
  hdd_end_run
  rm -rf -- "$tmp"

  if ((status != 0)); then
    echo "$PROG: $name failed (run $run, exit status $status; cgroup memory limit hit" \
      "$hdd_failcnt times, ${hdd_oom_kills:-?} OOM kills); its output:" >&2
    ((status != 125)) || echo "  (could not join the cgroups)" >&2
    tail -n 20 -- "$log" >&2
    [[ ! -f $timefile ]] || sed 's/^/  time: /' -- "$timefile" >&2
    exit 1
  fi
  # GNU time prints the format on the last line (earlier lines, if any, are
  # its own notes).
  local wall user sys rss written after_eof=0
  read -r wall user sys rss written < <(tail -n 1 -- "$timefile")
  if [[ $feed == sam ]]; then
    after_eof=$(awk -v a="$(<"$scratch/eof.$name")" -v b="$(<"$scratch/exit.$name")" \
      'BEGIN { printf "%.2f", b - a }')
  fi
  [[ -f $out ]] || die "$name exited 0 but wrote no $out"
  printf '  run %d: %-18s %7.2f s wall, %d reads / %.1f MiB read (peak %d reads/s), peak temp %s bytes,' \
    "$run" "$name" "$wall" "$hdd_reqs" "$(awk -v b="$hdd_bytes" 'BEGIN { print b / 1048576 }')" \
    "$peak_rps" "$tmp_peak"
  printf ' memory limit hit %d times\n' "$hdd_failcnt"
  awk -v t="$name" -v r="$run" -v w="$wall" -v u="$user" -v s="$sys" -v m="$rss" \
    -v c="$hdd_cg_max" -v rb="$hdd_bytes" -v rq="$hdd_reqs" -v p="$peak_rps" \
    -v wb="$written" -v tp="$tmp_peak" -v b="$(stat -c %s -- "$out")" -v e="$after_eof" \
    'BEGIN { printf "%s %d %.2f %.2f %.1f %.1f %.1f %d %d %.1f %.0f %.0f %.2f\n", t, r, w, u + s,
             m / 1024, c / 1048576, rb / 1048576, rq, p, wb * 512 / 1048576, tp, b, e }' \
    >>"$scratch/results"
}

# --- Main ----------------------------------------------------------------------------

scratch=""      # private directory for outputs and temporary files
gen_partial=""  # gen_reads output being written, if any
child=""        # pid of the measured command's subshell, while it runs

# Stops a running command, undoes the emulation's changes to the machine and
# removes the private directory; for the EXIT trap.
# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  set +e
  hdd_stop_run "$child"
  hdd_cleanup
  [[ -z $scratch ]] || rm -rf -- "$scratch"
  [[ -z $gen_partial ]] || rm -f -- "$gen_partial"
}

# Checks the options and the machine, prints the report's header sections,
# runs every command --runs times, then prints the results and --verify's
# findings. Exit status 1 if --verify found a difference.
main() {
  local invocation=("$0" "$@") name run
  parse_options "$@"
  check_options
  resolve_binaries
  level_args=()
  [[ -z $level ]] || level_args=(-l "$level")
  ref_args=()
  [[ -z $reference ]] || ref_args=(--reference "$reference")

  mkdir -p -- "$workdir" || die "can't create the work directory $workdir"
  workdir=$(cd -- "$workdir" && pwd -P)
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  hdd_init "$disk" "$iops" "$bps_bytes" "$mem_limit_bytes" "$workdir"
  scratch=$(mktemp -d "$workdir/.bench.XXXXXX")

  echo "== $PROG"
  print_command "${invocation[@]}"
  echo
  print_machine
  print_versions
  prepare_input

  echo
  echo "== Commands (each under /usr/bin/time -f '%e %U %S %M %O', in the run's cgroups)"
  for name in "${names[@]}"; do
    make_command "$name"
    print_command "${cmd[@]}"
  done

  echo
  echo "== Settings"
  hdd_print_settings
  echo "  sort budget: $threads x $mem"
  print_input_disk_note

  echo
  echo "== Running ($runs run(s) each)"
  for ((run = 1; run <= runs; run++)); do
    for name in "${names[@]}"; do
      measured_run "$name" "$run"
    done
  done

  print_results
  verify_status=0
  # Called as statements, not after || or &&, so that errexit holds in them.
  if ((verify)); then
    verify_outputs
  fi
  if ((keep)); then
    keep_outputs
  fi
  echo
  echo "== Done $(date '+%Y-%m-%d %H:%M:%S %Z')"
  exit "$verify_status"
}

main "$@"
