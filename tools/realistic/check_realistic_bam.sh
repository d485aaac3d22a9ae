#!/usr/bin/env bash
# check_realistic_bam.sh: checks the consistency of a BAM made by
# make_realistic_bam.sh (or any name-grouped, aligner-order BAM): every
# template's records are consecutive and its name unique; for each pair of
# primary records RNEXT/PNEXT are the mate's RNAME/POS, the mate flags
# (0x8, 0x20) are the mate's 0x4, 0x10, TLENs are opposite, MC is the mate's
# CIGAR (H and S alike); supplementary records point at the mate's primary
# (or, as bwa writes them, at themselves, with 0x20 as their own 0x10, if
# the mate is unmapped); every SA entry is another record of the same read;
# alignments and XA entries lie inside their contig; unmapped pairs have no
# position, CIGAR or mate.
#
# Usage: check_realistic_bam.sh FILE.bam [samtools]
# Prints a summary on stdout; exits 1 (after listing up to 20 problems on
# stderr) if anything is inconsistent.
set -euo pipefail

if (($# < 1)) || [[ $1 == -h || $1 == --help ]]; then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  (($# >= 1)) && exit 0
  exit 1
fi
bam=$1
samtools=${2:-samtools}
[[ -r $bam ]] || { echo "check_realistic_bam.sh: can't read \"$bam\"" >&2; exit 1; }

"$samtools" view -h "$bam" | awk -F '\t' '
function bit(f, k) { return int(f / 2 ^ k) % 2 }
function reflen(cigar,   n, total, c, i) {
  total = 0; n = 0
  for (i = 1; i <= length(cigar); i++) {
    c = substr(cigar, i, 1)
    if (c ~ /[0-9]/) { n = n * 10 + c; continue }
    if (c ~ /[MDN=X]/) total += n
    n = 0
  }
  return total
}
function problem(msg) {
  errors++
  if (errors <= 20) print "check_realistic_bam.sh: template " tname ": " msg > "/dev/stderr"
}
function tag(rec, name,   i, nf, parts) {
  nf = split(rec, parts, "\t")
  for (i = 12; i <= nf; i++) if (substr(parts[i], 1, 5) == name ":Z:") return substr(parts[i], 6)
  return ""
}
function inside(rname, pos, len, what) {
  if (!(rname in sqlen)) { problem(what " on unknown contig " rname); return }
  if (pos < 1 || pos + len - 1 > sqlen[rname]) problem(what " " rname ":" pos " (" len " bases) outside the contig (" sqlen[rname] ")")
}
function check_template(   i, j, f, seg, p, q, mrname, sa, ne, entries, e, ef, found, k, xa, strand, cig) {
  if (n == 0) return
  templates++
  if (tname in seen) problem("name used by an earlier template")
  seen[tname] = 1
  prim[0] = prim[1] = 0
  for (i = 1; i <= n; i++) {
    f = flag[i]
    if (f >= 2048) supp++
    if (bit(f, 8)) sec++
    if (bit(f, 8) || f >= 2048) continue
    seg = bit(f, 7) ? 1 : 0
    if (prim[seg]) problem("two primary records for read " seg + 1)
    prim[seg] = i
  }
  if (!bit(flag[1], 0)) return
  if (!prim[0] || !prim[1]) { problem("a primary record is missing"); return }
  if (flag[prim[0]] == 77 && flag[prim[1]] == 141) unmapped_pairs++
  for (i = 1; i <= n; i++) {
    f = flag[i]
    seg = bit(f, 7) ? 1 : 0
    p = prim[seg]; q = prim[1 - seg]
    if (bit(f, 2) && bit(flag[q], 2)) {
      if (rname[i] != "*" || pos[i] != 0 || cigar[i] != "*" || rnext[i] != "*" || pnext[i] != 0 || tlen[i] != 0 || mapq[i] != 0)
        problem("unmapped pair with a position, CIGAR or mate")
      continue
    }
    mrname = rnext[i] == "=" ? rname[i] : rnext[i]
    # bwa points a supplementary record whose mate is unmapped at itself.
    if (f >= 2048 && bit(f, 3) && mrname == rname[i] && pnext[i] == pos[i]) {
      # as bwa writes it
    } else if (mrname != rname[q] || pnext[i] != pos[q]) problem("record " i ": RNEXT/PNEXT " mrname ":" pnext[i] " but the mate is at " rname[q] ":" pos[q])
    if (bit(f, 3) != bit(flag[q], 2)) problem("record " i ": flag 0x8 differs from the mate 0x4")
    # (bwa sets 0x20 on such a self-pointing supplementary record as 0x10.)
    if (bit(f, 5) != bit(flag[q], 4) && !(f >= 2048 && bit(f, 3))) problem("record " i ": flag 0x20 differs from the mate 0x10")
    if (bit(f, 2)) {
      if (rname[i] != rname[q] || pos[i] != pos[q]) problem("unmapped read " i " not placed at its mate")
    } else {
      inside(rname[i], pos[i], reflen(cigar[i]), "record " i)
    }
    if (!bit(flag[q], 2)) {
      # bwa 0.7.17 writes the mate CIGAR with H instead of S on some
      # supplementary records; compare clips as S.
      mc = tag(line[i], "MC"); gsub(/H/, "S", mc)
      cig = cigar[q]; gsub(/H/, "S", cig)
      if (mc == "") problem("record " i ": no MC tag although the mate is mapped")
      else if (mc != cig) problem("record " i ": MC " mc " but the mate CIGAR is " cigar[q])
      if (i == p && rname[p] == rname[q] && tlen[p] != -tlen[q]) problem("TLEN " tlen[p] " and " tlen[q] " are not opposite")
      if (i == p && rname[p] != rname[q] && tlen[p] != 0) problem("mates on different contigs with TLEN " tlen[p])
    }
    sa = tag(line[i], "SA")
    if (sa != "") {
      sa_records++
      ne = split(sa, entries, ";")
      for (e = 1; e <= ne; e++) {
        if (entries[e] == "") continue
        split(entries[e], ef, ",")
        found = 0
        for (k = 1; k <= n; k++) {
          if (k == i || bit(flag[k], 7) != bit(f, 7)) continue
          strand = bit(flag[k], 4) ? "-" : "+"
          cig = cigar[k]; gsub(/H/, "S", cig)
          if (rname[k] == ef[1] && pos[k] == ef[2] && strand == ef[3] && cig == ef[4]) found = 1
        }
        if (!found) problem("record " i ": SA entry " entries[e] " matches no record of the read")
      }
    }
    xa = tag(line[i], "XA")
    if (xa != "") {
      xa_records++
      ne = split(xa, entries, ";")
      for (e = 1; e <= ne; e++) {
        if (entries[e] == "") continue
        split(entries[e], ef, ",")
        inside(ef[1], substr(ef[2], 2) + 0, reflen(ef[3]), "XA entry")
      }
    }
  }
}
/^@SQ/ {
  for (i = 2; i <= NF; i++) {
    if (substr($i, 1, 3) == "SN:") sn = substr($i, 4)
    if (substr($i, 1, 3) == "LN:") ln = substr($i, 4) + 0
  }
  sqlen[sn] = ln
  next
}
/^@/ { next }
{
  if ($1 != tname) { check_template(); n = 0; tname = $1 }
  n++
  records++
  line[n] = $0; flag[n] = $2 + 0; rname[n] = $3; pos[n] = $4 + 0; mapq[n] = $5 + 0
  cigar[n] = $6; rnext[n] = $7; pnext[n] = $8 + 0; tlen[n] = $9 + 0
}
END {
  check_template()
  printf "records %d, templates %d, unmapped pairs %d (%.3f%%), supplementary %d, secondary %d, records with SA %d, with XA %d, problems %d\n", records, templates, unmapped_pairs, templates ? 100 * unmapped_pairs / templates : 0, supp, sec, sa_records, xa_records, errors
  exit errors > 0
}'
