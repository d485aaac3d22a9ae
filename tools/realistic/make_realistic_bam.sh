#!/usr/bin/env bash
# make_realistic_bam.sh: builds (once, then caches) a deterministic, realistic
# unsorted BAM for benchmarking: art_illumina reads from real bacterial and
# archaeal genomes shipped in Debian packages, aligned with bwa mem, placed
# on a GRCh38 header by place_reads. See tools/realistic/README.md.
#
# The path of the BAM is the last line on stdout (everything else goes to
# stderr), so a harness can do: input=$(tools/realistic/make_realistic_bam.sh)
set -euo pipefail

readonly kProg=make_realistic_bam.sh
# Bump when the same options would give a different BAM: old caches are then
# rebuilt instead of reused.
readonly kGeneratorVersion=1
readonly kRefVersion=1
readonly kReadGroup='@RG\tID:sim1\tSM:sample1\tPL:ILLUMINA\tLB:lib1\tPU:unit1'
# bwa mem -K: bases per batch regardless of -t, so that the alignments (and
# the insert-size estimates made per batch) do not depend on the thread count.
readonly kBwaBatchBases=10000000
# Templates for ~20.7 M records (2.01 records per template, supplementary
# records included) and >= 2.5 GB of BAM.
readonly kDefaultTemplates=10300000
# Sources are simulated in this many rounds (each source once per round, with
# its own seed), so that every part of the file holds every kind of read.
readonly kRounds=8
# Share of templates from the chimeric source, in percent.
readonly kChimeraPercent=15
readonly kChimeraLength=20000000

readonly ragout=/usr/share/doc/ragout/examples
readonly cct=/usr/share/doc/cct/examples/sample_projects

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/../.." && pwd)
cache_dir="${TMPDIR:-/tmp}/rocksort-bench"

templates=$kDefaultTemplates
seed=1
threads=$(nproc 2>/dev/null || echo 2)
out=
workdir=
keep_work=0
place_reads="$repo_root/build/tools/place_reads"

usage() {
  cat <<EOF
Usage: $kProg [options]

Builds a deterministic, realistic unsorted BAM like an aligner's output
(art_illumina HiSeq 2500 2x150 reads from real genomes, bwa mem, placed on
the GRCh38 primary contigs with ~1.5 % unmapped pairs) and prints its path
as the last line on stdout. If the output already exists and its marker
(FILE.done) says it is complete, it is reused at once.

Options:
  --templates INT     read pairs to simulate [$kDefaultTemplates: 20.7 M records,
                      2.64 GB; 20-45 minutes on 2 cores]
  --seed INT          seed for art_illumina, the chimeras and place_reads,
                      0..100000 [$seed]
  --threads INT       threads for bwa mem and place_reads [$threads]
  --out FILE          output BAM [\${TMPDIR:-/tmp}/rocksort-bench/
                      realistic-TEMPLATES-sSEED.bam]
  --workdir DIR       where to make the scratch directory (FIFOs, source
                      FASTAs, logs), realistic-work.XXXXXX
                      [\${TMPDIR:-/tmp}/rocksort-bench]
  --keep-work         keep the scratch directory
  --place-reads PATH  the place_reads binary [$repo_root/build/tools/place_reads]
  -h, --help          print this help and exit

The same options give a byte-identical BAM; --threads changes only bwa's @PG
line (its command line), never the records. The bwa index of the reference is cached in
\${TMPDIR:-/tmp}/rocksort-bench/realistic-ref-v$kRefVersion/.

Quick check with a tiny input (~15 s once the index is cached):
  $kProg --templates 5000 --out /tmp/tiny.bam

Needs: bwa, art_illumina (art-nextgen-simulation-tools), ragout-examples,
cct-examples, and place_reads:
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
  cmake --build build -j2 --target place_reads
EOF
}

die() {
  echo "$kProg: $*" >&2
  exit 1
}
log() { echo "$kProg: $*" >&2; }

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

while (($# > 0)); do
  case $1 in
    -h | --help)
      usage
      exit 0
      ;;
    --templates | --seed | --threads | --out | --workdir | --place-reads)
      (($# >= 2)) || die "option $1 needs a value"
      case $1 in
        --templates) templates=$2 ;;
        --seed) seed=$2 ;;
        --threads) threads=$2 ;;
        --out) out=$2 ;;
        --workdir) workdir=$2 ;;
        --place-reads) place_reads=$2 ;;
      esac
      shift 2
      ;;
    --keep-work)
      keep_work=1
      shift
      ;;
    *)
      usage >&2
      die "unknown option: $1"
      ;;
  esac
done

is_uint "$templates" && ((templates >= 1 && templates <= 1000000000)) ||
  die "--templates: expected an integer in 1..1000000000, got \"$templates\""
is_uint "$seed" && ((seed <= 100000)) ||
  die "--seed: expected an integer in 0..100000, got \"$seed\""
is_uint "$threads" && ((threads >= 1 && threads <= 1024)) ||
  die "--threads: expected an integer in 1..1024, got \"$threads\""
# Strip leading zeros so that equal numbers name the same cache file.
templates=$((10#$templates))
seed=$((10#$seed))
[[ -n $out ]] || out="$cache_dir/realistic-$templates-s$seed.bam"

marker="$out.done"
marker_key="version=$kGeneratorVersion templates=$templates seed=$seed"

# --- The cache -------------------------------------------------------------

# Complete if the marker names this generator version and these options and
# records the file's current size.
if [[ -f $out && -f $marker ]]; then
  size=$(stat -c %s "$out")
  if [[ $(head -n 1 "$marker") == "$marker_key bytes=$size" ]]; then
    log "reusing $out ($size bytes)"
    echo "$out"
    exit 0
  fi
  log "$out exists but its marker does not match; rebuilding it"
fi

for tool in bwa art_illumina awk paste tr mkfifo; do
  command -v "$tool" >/dev/null || die "$tool not found (apt-get install bwa art-nextgen-simulation-tools)"
done
[[ -d $ragout && -d $cct ]] ||
  die "genomes not found under $ragout and $cct (apt-get install ragout-examples cct-examples)"
[[ -x $place_reads ]] ||
  die "$place_reads not found; build it first: cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build -j2 --target place_reads (or pass --place-reads PATH)"

mkdir -p "$cache_dir" "$(dirname "$out")"
# A fresh scratch directory inside --workdir (or the cache directory), so
# that cleanup never removes anything it did not create.
[[ -n $workdir ]] || workdir=$cache_dir
mkdir -p "$workdir"
workdir=$(mktemp -d "$(cd "$workdir" && pwd)/realistic-work.XXXXXX")
partial=$(mktemp "$out.partial.XXXXXX")

pipeline_pid=
cleanup() {
  local rc=$?
  if [[ -n $pipeline_pid ]]; then
    kill -TERM -- "-$pipeline_pid" 2>/dev/null || true
    wait "$pipeline_pid" 2>/dev/null || true
  fi
  rm -f "$partial"
  if ((keep_work)); then
    log "scratch files kept in $workdir"
  else
    rm -rf "$workdir"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- Genomes ---------------------------------------------------------------

# fasta_record FILE.fasta.gz K NAME: the K-th record of FILE, renamed NAME.
fasta_record() {
  zcat "$1" | awk -v want="$2" -v name="$3" '
    /^>/ { n++; if (n == want) print ">" name; next }
    n == want { print }'
}

# genbank_fasta FILE.gbk.gz NAME: the ORIGIN section of a GenBank file.
genbank_fasta() {
  zcat "$1" | awk -v name="$2" '
    BEGIN { print ">" name }
    /^ORIGIN/ { s = 1; next }
    /^\/\// { s = 0 }
    s {
      gsub(/[^A-Za-z]/, "")
      buf = buf toupper($0)
      while (length(buf) >= 60) { print substr(buf, 1, 60); buf = substr(buf, 61) }
    }
    END { if (length(buf)) print buf }'
}

# The reference: names and lengths as in the aligner slices in
# /work/shared/oracle/inputs (one strain per species).
readonly ref_names=(Ecoli_MG1655 Vcholerae_O395_chrI Vcholerae_O395_chrII
  Saureus_COL Hpylori_G27 Macetivorans_C2A Bjaponicum_USDA110)
readonly ref_lengths=(4639675 3024078 1111222 2809422 1652982 5751492 9105828)

build_reference() {
  fasta_record "$ragout/E.Coli/references/MG1655-K12.fasta.gz" 1 Ecoli_MG1655
  fasta_record "$ragout/V.Cholerae/references/O395.fasta.gz" 1 Vcholerae_O395_chrI
  fasta_record "$ragout/V.Cholerae/references/O395.fasta.gz" 2 Vcholerae_O395_chrII
  fasta_record "$ragout/S.Aureus/references/COL.fasta.gz" 1 Saureus_COL
  fasta_record "$ragout/H.Pylori/references/G27.fasta.gz" 1 Hpylori_G27
  genbank_fasta "$cct/sample_project_2/comparison_genomes/Methanosarcina_acetivorans.gbk.gz" \
    Macetivorans_C2A
  genbank_fasta "$cct/sample_project_3/reference_genome/NC_004463.gbk.gz" \
    Bjaponicum_USDA110
}

# Sequence lengths of a FASTA, one "name length" per line.
fasta_lengths() {
  awk '/^>/ { if (n) print name, len; name = substr($1, 2); len = 0; n++; next }
       { len += length($0) }
       END { if (n) print name, len }' "$1"
}

ref_dir="$cache_dir/realistic-ref-v$kRefVersion"
if [[ ! -f $ref_dir/complete ]]; then
  log "building the reference and its bwa index in $ref_dir (once; ~20 s)"
  tmp_ref=$(mktemp -d "$cache_dir/realistic-ref-v$kRefVersion.tmp.XXXXXX")
  build_reference >"$tmp_ref/ref.fa"
  expected=$(for i in "${!ref_names[@]}"; do echo "${ref_names[$i]} ${ref_lengths[$i]}"; done)
  [[ $(fasta_lengths "$tmp_ref/ref.fa") == "$expected" ]] ||
    die "the reference built from the Debian packages has unexpected names or lengths (see $tmp_ref/ref.fa)"
  (cd "$tmp_ref" && bwa index ref.fa) >"$tmp_ref/index.log" 2>&1 ||
    die "bwa index failed; see $tmp_ref/index.log"
  touch "$tmp_ref/complete"
  # A concurrent build may have won; then use its (identical) result.
  if ! mv -T "$tmp_ref" "$ref_dir" 2>/dev/null; then
    rm -rf "$tmp_ref"
    [[ -f $ref_dir/complete ]] || die "cannot create $ref_dir"
  fi
fi

# --- Read sources ----------------------------------------------------------

# Part of the reads come from the reference strain itself, part from other
# strains of the same species (natural divergence: mismatches, indels, soft
# clips, split and unmapped reads), part from library chimeras. Each source is
# one sequence; its share of templates is its length times its percentage.
#   name  percent  kind:file:record
readonly sources=(
  "Ecoli_MG1655 50 fa:E.Coli/references/MG1655-K12.fasta.gz:1"
  "Ecoli_DH1 50 fa:E.Coli/references/DH1.fasta.gz:1"
  "Vcholerae_O395_chrI 60 fa:V.Cholerae/references/O395.fasta.gz:1"
  "Vcholerae_O395_chrII 60 fa:V.Cholerae/references/O395.fasta.gz:2"
  "Vcholerae_N16961_chrI 40 fa:V.Cholerae/references/O1_biovar.fasta.gz:1"
  "Vcholerae_N16961_chrII 40 fa:V.Cholerae/references/O1_biovar.fasta.gz:2"
  "Saureus_COL 40 fa:S.Aureus/references/COL.fasta.gz:1"
  "Saureus_N315 30 fa:S.Aureus/references/N315.fasta.gz:1"
  "Saureus_RF122 30 fa:S.Aureus/references/RF122.fasta.gz:1"
  "Hpylori_G27 50 fa:H.Pylori/references/G27.fasta.gz:1"
  "Hpylori_SJM180 50 fa:H.Pylori/references/SJM180.fasta.gz:1"
  "Macetivorans_C2A 100 gb:sample_project_2/comparison_genomes/Methanosarcina_acetivorans.gbk.gz"
  "Bjaponicum_USDA110 100 gb:sample_project_3/reference_genome/NC_004463.gbk.gz"
)

mkdir -p "$workdir/src"
names=()
weights=()
for entry in "${sources[@]}"; do
  read -r name percent spec <<<"$entry"
  IFS=: read -r kind file record <<<"$spec"
  fa="$workdir/src/$name.fa"
  if [[ $kind == fa ]]; then
    fasta_record "$ragout/$file" "$record" "$name" >"$fa"
  else
    genbank_fasta "$cct/$file" "$name" >"$fa"
  fi
  length=$(fasta_lengths "$fa" | awk '{ print $2 }')
  [[ -n $length ]] && ((length > 100000)) || die "$fa: no sequence extracted"
  names+=("$name")
  weights+=($((length * percent / 100)))
done

# Chimeras: a sequence of 500..4500-base pieces of the reference, at random
# places and on random strands. Fragments across a junction give split reads
# (supplementary records with SA tags) and pairs whose mates are apart, as
# library chimeras do. The generator is Park-Miller (x * 16807 mod 2^31 - 1),
# exact in any awk's double arithmetic, so every awk gives the same sequence.
build_chimeras() {
  awk '/^>/ { printf "%s%s\t", (NR > 1 ? "\n" : ""), substr($1, 2); next }
       { printf "%s", $0 }
       END { print "" }' "$ref_dir/ref.fa" |
    awk -F '\t' -v seed="$1" -v total="$2" -v name=Chimeras '
      function rnd(n) { x = (x * 16807) % 2147483647; return int(x / 2147483647 * n) }
      function revcomp(s,   i, r, c) {
        r = ""
        for (i = length(s); i > 0; i--) {
          c = substr(s, i, 1)
          r = r ((c in comp) ? comp[c] : "N")
        }
        return r
      }
      { nc++; seq[nc] = toupper($2); len[nc] = length($2); all += len[nc] }
      END {
        comp["A"] = "T"; comp["C"] = "G"; comp["G"] = "C"; comp["T"] = "A"
        x = seed % 2147483646 + 1
        print ">" name
        out = 0
        while (out < total) {
          p = rnd(all)
          for (c = 1; p >= len[c]; c++) p -= len[c]
          n = 500 + rnd(4001)
          if (p + n > len[c]) p = len[c] - n
          s = substr(seq[c], p + 1, n)
          if (rnd(2)) s = revcomp(s)
          buf = buf s
          while (length(buf) >= 60) { print substr(buf, 1, 60); buf = substr(buf, 61) }
          out += n
        }
        if (length(buf)) print buf
      }'
}
build_chimeras $((seed * 7919 + 17)) "$kChimeraLength" >"$workdir/src/Chimeras.fa"
sum=0
for w in "${weights[@]}"; do sum=$((sum + w)); done
names+=(Chimeras)
weights+=($((sum * kChimeraPercent / (100 - kChimeraPercent))))

# Templates per source: proportional to the weights; the rounding remainder
# goes to the largest source.
total_weight=0
largest=0
for i in "${!weights[@]}"; do
  total_weight=$((total_weight + weights[i]))
  if ((weights[i] > weights[largest])); then largest=$i; fi
done
counts=()
assigned=0
for i in "${!weights[@]}"; do
  counts+=($((templates * weights[i] / total_weight)))
  assigned=$((assigned + counts[i]))
done
counts[largest]=$((counts[largest] + templates - assigned))

# --- Simulation and alignment ----------------------------------------------

# Writes interleaved FASTQ (read 1, read 2, read 1, ...) on stdout: every
# source once per round. art_illumina writes its two files into FIFOs, and
# paste interleaves them; art writes read 1 and read 2 of a pair one after
# the other, so neither FIFO can fill while paste waits on the other.
simulate() {
  local round i n art_pid art_rc prefix
  mkdir -p "$workdir/fifo"
  for ((round = 0; round < kRounds; round++)); do
    for i in "${!names[@]}"; do
      n=$((counts[i] / kRounds))
      if ((round == kRounds - 1)); then n=$((counts[i] - n * (kRounds - 1))); fi
      if ((n == 0)); then continue; fi
      prefix="$workdir/fifo/r${round}_$i."
      mkfifo "${prefix}1.fq" "${prefix}2.fq"
      # The subshell opens both FIFOs for writing before art starts (each
      # open waits for paste to open the other end) and holds them until art
      # has exited, so paste sees end-of-file even if art fails before
      # opening its outputs.
      (
        exec 3>"${prefix}1.fq" 4>"${prefix}2.fq"
        exec art_illumina -ss HS25 -p -l 150 -m 400 -s 50 -c "$n" \
          -rs $((seed * 10007 + round * 101 + i + 1)) -na -q \
          -i "$workdir/src/${names[i]}.fa" -o "$prefix" >>"$workdir/art.log" 2>&1
      ) &
      art_pid=$!
      paste <(paste - - - - <"${prefix}1.fq") <(paste - - - - <"${prefix}2.fq") |
        tr '\t' '\n'
      art_rc=0
      wait "$art_pid" || art_rc=$?
      ((art_rc == 0)) || die "art_illumina failed on ${names[i]} (round $round)"
      rm -f "${prefix}1.fq" "${prefix}2.fq"
    done
  done
}

log "simulating $templates read pairs (seed $seed) and aligning them with $threads threads into $out"
log "sources (templates): $(for i in "${!names[@]}"; do printf '%s=%s ' "${names[i]}" "${counts[i]}"; done)"
start=$SECONDS
rm -f "$marker"
# bwa runs in the reference directory with relative paths, so that its @PG
# command line does not depend on where the cache is.
run_pipeline() {
  simulate |
    (cd "$ref_dir" && exec bwa mem -p -t "$threads" -K "$kBwaBatchBases" -R "$kReadGroup" \
      ref.fa - 2>"$workdir/bwa.log") |
    "$place_reads" -@ "$threads" --seed "$seed" -o "$partial" - 2>"$workdir/place_reads.log"
}
# In a process group of its own (set -m), so that the traps run at once on a
# signal and cleanup can end all of it (art, paste, bwa, place_reads).
set -m
run_pipeline &
pipeline_pid=$!
set +m
pipeline_rc=0
wait "$pipeline_pid" || pipeline_rc=$?
pipeline_pid=
if ((pipeline_rc != 0)); then
  for f in art bwa place_reads; do
    [[ -s $workdir/$f.log ]] && { echo "--- $f.log (last lines):"; tail -n 5 "$workdir/$f.log"; } >&2
  done
  die "the pipeline failed (--keep-work keeps the logs in the scratch directory)"
fi
cat "$workdir/place_reads.log" >&2
size=$(stat -c %s "$partial")
stats=$(grep -m 1 ' records (' "$workdir/place_reads.log" || true)
chmod 644 "$partial"
sync "$partial" 2>/dev/null || sync
mv -f "$partial" "$out"
printf '%s bytes=%s\n%s\nbuilt in %d s\n' "$marker_key" "$size" "$stats" $((SECONDS - start)) >"$marker"
log "wrote $out ($size bytes) in $((SECONDS - start)) s"
echo "$out"
