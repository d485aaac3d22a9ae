#!/usr/bin/env bash
# bench.sh: the benchmark harness. Sorts one BAM with samtools sort 1.23.1
# (the peer, and the baseline of every ratio) and rocksort, optionally also
# with Debian's samtools 1.16.1 and rocksort --no-compaction, and copies it
# unsorted (samtools view -b: the floor no sorter beats). Each run is
# measured in its own cgroups after the page cache was dropped, on an
# emulated spinning disk or the unthrottled one (tools/hdd_emulation.sh;
# docs/hdd_emulation.md). Run `tools/bench.sh -h` for usage.

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

# --- Options and their defaults -------------------------------------------------

input_spec=realistic
feed="file"
reference=""
gen=$REPO/build/tools/gen_reads
only=all
samtools_opt=""  # --samtools as given; empty means the peer's default path
debian_samtools=/usr/bin/samtools
rocksort=$REPO/build/tools/rocksort
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
unsorted copy. Needs root and cgroup v1 blkio and memory hierarchies
(docs/hdd_emulation.md).

Input:
  --input WHAT       one of [$input_spec]:
                     realistic[:TEMPLATES[:SEED]]  the realistic BAM of
                       tools/realistic/make_realistic_bam.sh (built once and
                       cached, about 20 minutes; its defaults when omitted)
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

Sorting (the same for every command):
  --threads N        -@ N [$threads]
  --mem SIZE         -m SIZE, memory per thread (K/M/G, powers of 1024) [$mem]
  --order 'FLAGS'    sort-order flags for every sort, split at spaces, e.g.
                     -n, -N, '-t RG', --template-coordinate [coordinate]
  --level L          -l L output compression level, copy included
                     [each tool's default]
  -- ARGS...         extra arguments for rocksort and rocksort-nocompact,
                     before the input

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
  --keep             keep the last run's outputs as DIR/out.NAME.bam, what
                     each command printed as DIR/log.NAME.txt (pass -v to
                     rocksort after -- for its statistics) and its timeline
                     as DIR/timeline.NAME.tsv: per ~1 s, read requests/s,
                     MiB/s read, cores busy and temporary MiB
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
  # --only as a list of commands, "all" expanded, each once, in order.
  names=()
  IFS=, read -r -a words <<<"$only"
  ((${#words[@]} > 0)) || die "--only: expected a list of commands, got '$only'"
  for word in "${words[@]}"; do
    case $word in
      all) w=(samtools rocksort) ;;
      samtools | samtools-1.16 | rocksort | rocksort-nocompact | copy) w=("$word") ;;
      *) die "--only: expected samtools, samtools-1.16, rocksort, rocksort-nocompact, copy or all, got '$word'" ;;
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
  [[ -x /usr/bin/time ]] || die "GNU time not found at /usr/bin/time (apt-get install time)"
}

# --- Report sections ----------------------------------------------------------------

# Prints the "== Machine" section: date, CPU, cores, RAM, kernel, the disk
# under the work directory.
print_machine() {
  local q=/sys/block/$hdd_disk/queue model
  model=$(LC_ALL=C lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
  echo "== Machine"
  echo "  date: $(date '+%Y-%m-%d %H:%M:%S %Z') (start)"
  echo "  cpu: ${model:-?}, $(nproc) cores (nproc)"
  echo "  ram: $(awk '$1 == "MemTotal:" { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
  echo "  kernel: $(uname -sr)"
  echo "  disk: $hdd_disk ($hdd_disk_dev), $(human_bytes "$(($(<"/sys/block/$hdd_disk/size") * 512))")," \
    "rotational=$(<"$q/rotational"), scheduler $(sed 's/.*\[\(.*\)\].*/\1/' "$q/scheduler" 2>/dev/null || echo '?')," \
    "read_ahead_kb $hdd_ra_orig"
  echo "  workdir: $workdir ($(df -h --output=avail -- "$workdir" | tail -n 1 | tr -d ' ') free)"
}

# Prints the "== Versions" section: each binary that runs, with its version.
print_versions() {
  local peer_version
  peer_version=$(version_of "$samtools")
  echo
  echo "== Versions"
  echo "  samtools: $samtools: $peer_version"
  if [[ $peer_version != "samtools $PEER_VERSION" ]]; then
    echo "  note: the baseline is '$peer_version', not samtools $PEER_VERSION; the ratios are against it"
  fi
  if runs_command samtools-1.16; then
    echo "  samtools-1.16: $debian_samtools: $(version_of "$debian_samtools")"
  fi
  if runs_command rocksort || runs_command rocksort-nocompact; then
    echo "  rocksort: $rocksort: $(version_of "$rocksort")"
  fi
}

# --- Input ------------------------------------------------------------------------

# Parses --input into input_kind (realistic, gen or file) and input_a,
# input_b (realistic: templates and seed, empty for the script's defaults;
# gen: size and seed; file: its absolute path).
check_input_spec() {
  local rest
  input_a="" input_b=""
  case $input_spec in
    realistic | realistic:*)
      input_kind=realistic
      rest=${input_spec#realistic}
      IFS=: read -r input_a input_b <<<"${rest#:}"
      [[ -z $input_a || $input_a =~ ^[0-9]+$ ]] ||
        die "--input realistic:TEMPLATES[:SEED]: TEMPLATES must be an integer, got '$input_a'"
      [[ -z $input_b || $input_b =~ ^[0-9]+$ ]] ||
        die "--input realistic:TEMPLATES:SEED: SEED must be an integer, got '$input_b'"
      ;;
    gen:*)
      input_kind=gen
      IFS=: read -r input_a input_b <<<"${input_spec#gen:}"
      if ! is_size "$input_a" || (($(to_bytes "$input_a") == 0)); then
        die "--input gen:SIZE[:SEED]: SIZE must be a positive integer with optional K/M/G, got '$input_a'"
      fi
      [[ -z $input_b || $input_b =~ ^[0-9]+$ ]] ||
        die "--input gen:SIZE:SEED: SEED must be a non-negative integer, got '$input_b'"
      input_b=${input_b:-1}
      ;;
    *)
      input_kind="file"
      [[ -f $input_spec && -r $input_spec ]] ||
        die "--input: not a readable file: '$input_spec' (or realistic, or gen:SIZE)"
      input_a=$(realpath -- "$input_spec")
      ;;
  esac
}

# Sets input (an absolute path) and input_records (a count, or empty if
# unknown), making the BAM first if needed; prints the "== Input" section.
prepare_input() {
  echo
  echo "== Input"
  input_records=""
  case $input_kind in
    realistic) realistic_input "$input_a" "$input_b" ;;
    gen) gen_input "$input_a" "$input_b" ;;
    file)
      input=$input_a
      "$samtools" view -H "${ref_args[@]}" -- "$input" >/dev/null ||
        die "--input: samtools can't read the header of $input"
      ;;
  esac
  echo "  $input"
  echo "  $(stat -c %s -- "$input") bytes ($(human_bytes "$(stat -c %s -- "$input")")), ${input_records:-an uncounted number of} records"
  [[ $feed == file ]] || sam_copy
}

# Sets $sam_input to the SAM text of $input (header included), made once
# next to it (or in the work directory) and reused while newer than it.
sam_copy() {
  local partial
  sam_input=$input.sam
  [[ -w $(dirname -- "$input") ]] || sam_input=$workdir/$(basename -- "$input").sam
  if [[ ! -f $sam_input || $sam_input -ot $input ]]; then
    echo "  making its SAM copy once for --feed sam:"
    print_command "$samtools" view -h --no-PG -@ "$threads" "${ref_args[@]}" -o "$sam_input" "$input"
    partial=$sam_input.partial
    gen_partial=$partial
    "$samtools" view -h --no-PG -@ "$threads" "${ref_args[@]}" -o "$partial" -- "$input" ||
      die "samtools view could not make the SAM copy $sam_input"
    mv -f -- "$partial" "$sam_input"
    gen_partial=""
  fi
  echo "  fed as SAM text: cat $sam_input ($(human_bytes "$(stat -c %s -- "$sam_input")")) | COMMAND -"
}

# The realistic input: runs tools/realistic/make_realistic_bam.sh (with
# --templates $1 and --seed $2 when given), which builds the BAM unless it
# is cached and prints its path last; the record count comes from its
# marker FILE.done when that has one.
realistic_input() {
  local cmd=(bash "$REALISTIC")
  [[ -z $1 ]] || cmd+=(--templates "$1")
  [[ -z $2 ]] || cmd+=(--seed "$2")
  [[ -f $REALISTIC ]] || die "$REALISTIC not found; pass --input gen:SIZE or --input FILE"
  echo "  from (it reuses its cached BAM, or builds it: about 20 minutes at the default size):"
  print_command "${cmd[@]}"
  input=$("${cmd[@]}" | tail -n 1) || die "make_realistic_bam.sh failed"
  [[ -f $input ]] || die "make_realistic_bam.sh printed '$input', which is not a file"
  input=$(realpath -- "$input")
  if [[ -f $input.done ]]; then
    input_records=$(sed -n 's/.* \([0-9][0-9]*\) records .*/\1/p' "$input.done" | head -n 1)
  fi
}

# The generated input of size $1 and seed $2: DIR/input-SIZE-sSEED.bam,
# made by gen_reads unless a valid one is cached. Its record count is kept
# in FILE.records ("bytes=B records=N"), from gen_reads' message or counted
# once.
gen_input() {
  local size=$1 seed=$2 gen_bin cmd log bytes
  input="$workdir/input-$size-s$seed.bam"
  if [[ -f $input ]] && "$samtools" quickcheck -- "$input"; then
    echo "  cached (delete it to make it anew with gen_reads)"
  else
    gen_bin=$(resolve_binary gen_reads "$gen" "build it, or pass --gen PATH")
    gen_partial="$input.tmp.bam"
    cmd=("$gen_bin" -o "$gen_partial" --target-bytes "$size" --seed "$seed" -@ "$GEN_THREADS")
    echo "  generated by:"
    print_command "${cmd[@]}"
    log="$scratch/gen_reads.log"
    "${cmd[@]}" 2>"$log" || { cat -- "$log" >&2; die "gen_reads failed"; }
    # Renamed only when complete, so an interrupted run never leaves a
    # truncated file that a later run would take for the cached input.
    mv -f -- "$gen_partial" "$input"
    gen_partial=""
    rm -f -- "$input.records"
    input_records=$(sed -n 's/.*wrote \([0-9][0-9]*\) records.*/\1/p' "$log" | head -n 1)
  fi
  bytes=$(stat -c %s -- "$input")
  if [[ -z $input_records && -f $input.records ]]; then
    input_records=$(sed -n "s/^bytes=$bytes records=\([0-9][0-9]*\)\$/\1/p" "$input.records")
  fi
  if [[ -z $input_records ]]; then
    echo "  counting its records once (samtools view -c)"
    input_records=$("$samtools" view -c -@ "$threads" -- "$input")
  fi
  echo "bytes=$bytes records=$input_records" >"$input.records"
}

# Prints a note for the "== Settings" section if the input is not on the
# disk under the work directory: its reads are then neither throttled nor
# counted.
print_input_disk_note() {
  local disk dev
  if read -r disk dev < <(hdd_disk_of "$input") && [[ $dev == "$hdd_disk_dev" ]]; then
    return 0
  fi
  echo "  note: the input is not on $hdd_disk, the disk under --workdir: its reads are not counted" \
    "(nor throttled)"
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
  local start t0 t1 n0 b0 c0 rate peak_rps=0 tmp_now tmp_peak=0
  printf 'seconds\treads_per_s\tread_MiB_per_s\tcores_busy\ttemp_MiB\n' >"$timeline"
  start=$EPOCHREALTIME
  t0=$start
  hdd_sample
  n0=$hdd_reqs b0=$hdd_bytes c0=$hdd_ticks
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
      'BEGIN { d = b - a; if (d > 0) printf "%.1f\t%.0f\t%.1f\t%.2f\t%.1f\n", b - s, n / d,
               m / d / 1048576, c / hz / d, t / 1048576 }' >>"$timeline"
    t0=$t1 n0=$hdd_reqs b0=$hdd_bytes c0=$hdd_ticks
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

# --- Results ---------------------------------------------------------------------------

# Prints the "== Results" section from $scratch/results: every run, the
# medians, and each command's median wall time relative to samtools' and to
# copy's.
print_results() {
  local mode
  if [[ $disk == hdd ]]; then
    mode="emulated HDD: $iops IOPS, $bps_bytes B/s, read_ahead_kb $HDD_RA_KB"
  else
    mode="unthrottled disk"
  fi
  echo
  echo "== Results ($mode; memory limit $((mem_limit_bytes / MIB)) MiB)"
  awk -v runs="$runs" -v unthrottled="$([[ $disk == unthrottled ]] && echo 1 || echo 0)" \
    -v order="${names[*]}" -v peer="samtools" -v feed="$feed" \
    -f "$REPO/tools/bench_results.awk" "$scratch/results"
  if [[ $disk == hdd ]]; then
    echo
    echo "  HDD penalty: run again with --disk unthrottled and divide the wall times."
  fi
}

# --- Verify ---------------------------------------------------------------------------

# Dies unless $1 is a valid BAM.
check_bam() {
  "$samtools" quickcheck -- "$1" || die "not a valid BAM: $1"
}

# Prints the header of BAM $1 without its @PG lines.
bam_header() {
  "$samtools" view --no-PG -H -- "$1" | grep -v '^@PG' || true
}

# Prints the records of BAM $1 as SAM text.
bam_records() {
  "$samtools" view --no-PG -@ "$threads" -- "$1"
}

# Prints the number of the first record where BAMs $1 and $2 differ, or
# nothing if that can't be told.
first_difference() {
  cmp -- <(bam_records "$1") <(bam_records "$2") 2>&1 |
    sed -n 's/.* line \([0-9][0-9]*\).*/\1/p' || true
}

# Prints the "== Verify" section: every sort's last output against the first
# sort's, header without @PG and records. Sets verify_status to 1 if one
# differs, else 0.
verify_outputs() {
  local base="$scratch/out.${sorts[0]}.bam" records_base name f first
  verify_status=0
  echo
  echo "== Verify (last run's outputs against the first sort's, ${sorts[0]})"
  check_bam "$base"
  records_base=$(bam_records "$base" | md5sum)
  for name in "${sorts[@]:1}"; do
    f="$scratch/out.$name.bam"
    check_bam "$f"
    if [[ $(bam_header "$base" | md5sum) == "$(bam_header "$f" | md5sum)" ]]; then
      echo "  $name header (without @PG): IDENTICAL"
    else
      echo "  $name header (without @PG): DIFFERENT"
      diff <(bam_header "$base") <(bam_header "$f") | head -n 10 | sed 's/^/    /' || true
      verify_status=1
    fi
    if [[ $(bam_records "$f" | md5sum) == "$records_base" ]]; then
      echo "  $name records: IDENTICAL (${records_base%% *})"
    else
      first=$(first_difference "$base" "$f")
      echo "  $name records: DIFFERENT (first difference at record ${first:-?})"
      if [[ -n $first ]]; then
        echo "    ${sorts[0]}: $(bam_records "$base" | sed -n "${first}{p;q}" | cut -c 1-150)"
        echo "    $name: $(bam_records "$f" | sed -n "${first}{p;q}" | cut -c 1-150)"
      fi
      verify_status=1
    fi
  done
  ((${#sorts[@]} > 1)) || echo "  (only one sort ran; nothing to compare)"
  ! runs_command copy || echo "  copy: not compared (its records are in input order)"
}

# Moves the last run's output, log and timeline of every command into the
# work directory and prints the "== Kept outputs" section.
keep_outputs() {
  local name
  echo
  echo "== Kept outputs"
  for name in "${names[@]}"; do
    mv -f -- "$scratch/out.$name.bam" "$workdir/out.$name.bam"
    mv -f -- "$scratch/log.$name.$runs" "$workdir/log.$name.txt"
    mv -f -- "$scratch/timeline.$name.$runs" "$workdir/timeline.$name.tsv"
    echo "  $workdir/out.$name.bam, $workdir/log.$name.txt, $workdir/timeline.$name.tsv"
  done
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
