# shellcheck shell=bash disable=SC2153,SC2154  # bench.sh's variables and constants
# bench_lib.sh: the input and the report of tools/bench.sh. Sourced, never
# run: it defines functions only, which bench.sh calls after checking its
# options.
#
# The input: check_input_spec parses --input; prepare_input makes or finds
# the BAM (the realistic one, a cached gen_reads one, or a file) and its SAM
# copy for --feed sam. The report: the "== Machine", "== Versions",
# "== Input", "== Results" and "== Verify" sections, and --keep's outputs.
#
# These functions read bench.sh's option variables and globals (samtools,
# threads, workdir, scratch, names, sorts...) and its helpers (die,
# print_command, human_bytes, version_of, resolve_binary, is_size, to_bytes,
# runs_command), and the hdd_* globals of tools/hdd_emulation.sh. Globals
# they set for bench.sh: input_kind, input_a, input_b (check_input_spec);
# input, input_records, sam_input, gen_partial (prepare_input);
# verify_status (verify_outputs).

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
  if runs_command rocksort-b; then
    echo "  rocksort-b: $rocksort_b: $(version_of "$rocksort_b")${b_args:+ with $b_args}"
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
  echo "  from (it reuses its cached BAM, or builds it: 20-45 minutes at the default size):"
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
# shellcheck disable=SC2034  # verify_status is read by bench.sh's main
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

# Moves the last run's output, and every run's log and timeline, of every
# command into the work directory and prints the "== Kept outputs" section.
keep_outputs() {
  local name run
  echo
  echo "== Kept outputs"
  for name in "${names[@]}"; do
    mv -f -- "$scratch/out.$name.bam" "$workdir/out.$name.bam"
    for ((run = 1; run <= runs; run++)); do
      mv -f -- "$scratch/log.$name.$run" "$workdir/log.$name.$run.txt"
      mv -f -- "$scratch/timeline.$name.$run" "$workdir/timeline.$name.$run.tsv"
    done
    echo "  $workdir/out.$name.bam, $workdir/log.$name.RUN.txt, $workdir/timeline.$name.RUN.tsv (RUN 1..$runs)"
  done
}
