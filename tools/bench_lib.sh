# shellcheck shell=bash
# bench_lib.sh: code shared by tools/bench.sh and tools/bench_hdd.sh. Sourced,
# never run; it only defines functions, so sourcing it has no other effect.
#
# What it provides:
#   die, print_command, resolve_binary, is_size, is_count   small helpers
#   parse_options "$@"     the options both scripts take, with hooks for the
#                          script's own (see below)
#   check_input_options, check_run_options   validate the shared options
#   require_samtools_and_time                sets samtools; checks GNU time
#   prepare_workdir        creates the work directory; sets workdir, input
#   set_traps              EXIT runs cleanup; INT and TERM exit 130 and 143
#   print_machine          the "== Machine" section
#   prepare_input N        the "== Input" section: generates the cached input
#                          with gen_reads -@ N unless a valid one is there
#   awk_median             awk source of median(tool, col) for the reports
#   check_bam, bam_header, bam_records, compare_headers, first_difference
#                          for --verify
#
# What it expects from the sourcing script:
#   - set -euo pipefail (die and the helpers rely on errexit to stop the
#     script when a command substitution dies);
#   - PROG, the script's name for messages;
#   - a function usage (printed for -h/--help), a function cleanup (run on
#     exit by set_traps) and, for parse_options, the script's own options:
#     arrays SCRIPT_FLAG_OPTIONS and SCRIPT_VALUE_OPTIONS with their names and
#     a function script_option NAME [VALUE] that stores one of them.
#
# Globals it sets: parse_options sets size, seed, threads, mem, workdir,
# rocksort, gen, runs, verify, keep and extra (the words after --);
# require_samtools_and_time sets samtools; prepare_workdir sets workdir (made
# absolute) and input. The other functions read these.

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

# True if word $1 is one of the remaining arguments.
is_one_of() {
  local word=$1 item
  shift
  for item in "$@"; do
    [[ $item == "$word" ]] && return 0
  done
  return 1
}

# --- Options ------------------------------------------------------------------

# Sets the shared options to their defaults, then parses the command line:
# -h/--help, --verify, --keep, the shared options that take a value, and --
# (the rest goes to extra). An option named in SCRIPT_FLAG_OPTIONS is passed
# to script_option NAME, one in SCRIPT_VALUE_OPTIONS to script_option NAME
# VALUE; anything else is an error.
# shellcheck disable=SC2034  # the options are read by the sourcing script
parse_options() {
  size=256M
  seed=1
  threads=2
  mem=768M
  workdir="${TMPDIR:-/tmp}/rocksort-bench"
  rocksort=./build/tools/rocksort
  gen=./build/tools/gen_reads
  runs=1
  verify=0
  keep=0
  extra=()
  while (($# > 0)); do
    case $1 in
      -h | --help)
        usage
        exit 0
        ;;
      --verify) verify=1 ;;
      --keep) keep=1 ;;
      --)
        shift
        extra=("$@")
        break
        ;;
      --size | --seed | --threads | --mem | --workdir | --rocksort | --gen | \
        --runs)
        (($# >= 2)) || die "option $1 needs an argument (see $PROG -h)"
        case $1 in
          --size) size=$2 ;;
          --seed) seed=$2 ;;
          --threads) threads=$2 ;;
          --mem) mem=$2 ;;
          --workdir) workdir=$2 ;;
          --rocksort) rocksort=$2 ;;
          --gen) gen=$2 ;;
          --runs) runs=$2 ;;
        esac
        shift
        ;;
      *)
        if is_one_of "$1" "${SCRIPT_FLAG_OPTIONS[@]}"; then
          script_option "$1"
        elif is_one_of "$1" "${SCRIPT_VALUE_OPTIONS[@]}"; then
          (($# >= 2)) || die "option $1 needs an argument (see $PROG -h)"
          script_option "$1" "$2"
          shift
        else
          die "unknown option '$1' (see $PROG -h)"
        fi
        ;;
    esac
    shift
  done
}

# Validates --size, --seed, --threads and --mem.
check_input_options() {
  is_size "$size" || die "--size: expected an integer with optional K/M/G, got '$size'"
  [[ $seed =~ ^[0-9]+$ ]] || die "--seed: expected a non-negative integer, got '$seed'"
  is_count "$threads" || die "--threads: expected a positive integer, got '$threads'"
  is_size "$mem" || die "--mem: expected an integer with optional K/M/G, got '$mem'"
}

# Validates --runs and --workdir.
check_run_options() {
  is_count "$runs" || die "--runs: expected a positive integer, got '$runs'"
  [[ -n $workdir ]] || die "--workdir: empty path"
}

# --- Setup --------------------------------------------------------------------

require_samtools_and_time() {
  samtools=$(resolve_binary samtools samtools "install samtools")
  [[ -x /usr/bin/time ]] || die "GNU time not found at /usr/bin/time (apt-get install time)"
}

# Creates the work directory, makes workdir absolute and sets input to the
# cached input's name, DIR/input-SIZE-sSEED.bam (the same for both scripts,
# so they share inputs).
prepare_workdir() {
  mkdir -p -- "$workdir" || die "can't create work directory $workdir"
  workdir=$(cd -- "$workdir" && pwd -P)
  input="$workdir/input-$size-s$seed.bam"
}

set_traps() {
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# --- Report sections ----------------------------------------------------------

print_machine() {
  echo "== Machine"
  echo "  nproc: $(nproc)"
  echo "  cpu: $(LC_ALL=C lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)"
  echo "  kernel: $(uname -sr)"
  free -g | sed 's/^/  /'
  echo "  $("$samtools" --version | head -n 1)"
  echo "  workdir: $workdir ($(df -h --output=avail -- "$workdir" | tail -n 1 | tr -d ' ') free)"
}

# Prints the "== Input" section, generating $input with gen_reads -@ $1 first
# unless a valid one is cached. gen_reads writes its command line into @PG,
# so the input's bytes depend on the output path and every argument.
prepare_input() {
  local gen_threads=$1 gen_bin gen_cmd input_bytes input_records
  echo
  echo "== Input"
  if [[ -f $input ]] && "$samtools" quickcheck -- "$input"; then
    echo "  reusing cached $input"
  else
    gen_bin=$(resolve_binary gen_reads "$gen" "build it, or pass --gen PATH")
    gen_cmd=("$gen_bin" -o "$input.tmp.bam" --target-bytes "$size" --seed "$seed"
      -@ "$gen_threads")
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
}

# Prints the awk source of median(tool, col): the median of column col over
# the input lines whose first field is tool. The awk program must store each
# line's first field in name[NR] and its columns in val[NR, col].
awk_median() {
  cat <<'EOF'
  function median(tool, col,    n, i, j, t, v) {
    n = 0
    for (i = 1; i <= NR; i++) if (name[i] == tool) v[++n] = val[i, col]
    for (i = 2; i <= n; i++)  # insertion sort; n is small
      for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
EOF
}

# --- Verify -------------------------------------------------------------------

# Dies unless $1 is a valid BAM.
check_bam() {
  "$samtools" quickcheck -- "$1" || die "not a valid BAM: $1"
}

# The header of BAM $1 without its @PG lines.
bam_header() {
  "$samtools" view --no-PG -H -- "$1" | grep -v '^@PG' || true
}

# The records of BAM $1 as SAM text.
bam_records() {
  "$samtools" view --no-PG -@ "$threads" -- "$1"
}

# Compares the headers (without @PG) of BAMs $2 and $3; prints
# "  $1header (without @PG): IDENTICAL", or DIFFERENT and the start of the
# diff, in which case it returns 1.
compare_headers() {
  local label=$1 a=$2 b=$3
  if [[ $(bam_header "$a" | md5sum) == "$(bam_header "$b" | md5sum)" ]]; then
    echo "  ${label}header (without @PG): IDENTICAL"
  else
    echo "  ${label}header (without @PG): DIFFERENT"
    diff <(bam_header "$a") <(bam_header "$b") | head -n 10 | sed 's/^/    /' || true
    return 1
  fi
}

# Prints the number of the first record where BAMs $1 and $2 differ, or
# nothing if that can't be told.
first_difference() {
  cmp -- <(bam_records "$1") <(bam_records "$2") 2>&1 |
    sed -n 's/.* line \([0-9][0-9]*\).*/\1/p' || true
}
