# bench_results.awk: the "== Results" tables of tools/bench.sh, from its
# results file, one line per run:
#   name run wall_s cpu_s rss_mib cg_mib read_mib read_reqs peak_rps
#   write_mib tmp_bytes out_bytes after_eof_s
# Variables: runs (runs per command), order (command names, space-separated,
# in run order), peer (the baseline's name), unthrottled (1 or 0), feed
# ("file", or "sam": after_eof_s is measured and compared too). With more
# than one run, each command's wall time is also divided by the peer's run
# by run.

# The median of column col over the runs of tool.
function median(tool, col,    n, i, j, t, v) {
  n = 0
  for (i = 1; i <= NR; i++) if (name[i] == tool) v[++n] = val[i, col]
  for (i = 2; i <= n; i++)  # insertion sort; n is small
    for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
  return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}

# One row of the table: run r of tool t, values from column 3 on in v.
function row(t, r, v,    w) {
  w = v[3]
  printf "  %-18s %4s %8.2f %7.2f %7.1f %7.1f %8.1f %9d %6.1f %6d %9.1f %12.0f %12.0f", t, r, w,
    v[4], v[5], v[6], v[7], v[8], (w > 0 ? v[8] / w : 0), v[9], v[10], v[11], v[12]
  if (feed == "sam") printf " %11.2f", v[13]
  printf "\n"
}

function ratio(w, base) {
  if (base <= 0 || w <= 0) return "n/a"
  return sprintf("%.2f", w / base)
}

# The ratio of w to base, with "(N.NNx faster)" or "slower" for a tool
# other than the peer.
function vs(tool, w, base,    r) {
  r = ratio(w, base)
  if (r != "n/a" && tool != peer)
    r = r (w == base ? " (same)" : sprintf(" (%.2fx %s)", (w < base ? base / w : w / base),
      (w < base ? "faster" : "slower")))
  return r
}

{ name[NR] = $1; for (c = 2; c <= 13; c++) val[NR, c] = $c; wall[$1, $2] = $3 }

END {
  printf "  %-18s %4s %8s %7s %7s %7s %8s %9s %6s %6s %9s %12s %12s", "command", "run", "wall_s",
    "cpu_s", "rss_MiB", "cg_MiB", "read_MiB", "read_reqs", "avg/s", "peak/s", "write_MiB",
    "tmp_bytes", "output_bytes"
  if (feed == "sam") printf " %11s", "after_eof_s"
  printf "\n"
  for (i = 1; i <= NR; i++) {
    for (c = 3; c <= 13; c++) v[c] = val[i, c]
    row(name[i], val[i, 2], v)
  }
  k = split(order, tool, " ")
  if (runs > 1) {
    print ""
    printf "  medians of %d runs:\n", runs
    for (i = 1; i <= k; i++) {
      for (c = 3; c <= 13; c++) v[c] = median(tool[i], c)
      row(tool[i], "med", v)
    }
  }
  print ""
  print "  cpu_s = user + sys; rss_MiB = peak RSS (GNU time %M); cg_MiB = memory.max_usage_in_bytes"
  print "  (includes page cache); read_MiB, read_reqs = Read lines of blkio.throttle.io_service_bytes"
  print "  and io_serviced for the disk; avg/s = read_reqs / wall_s; peak/s = highest read requests"
  print "  per second over ~1 s samples; write_MiB = bytes the command wrote to files, temporary"
  print "  files and the output (GNU time %O x 512 B), never throttled; tmp_bytes = peak temporary"
  print "  space: the largest total size of the files under the command's -T directory, sampled"
  print "  once a second (0 for a run shorter than a second)."
  if (feed == "sam")
    print "  after_eof_s = seconds from the end of stdin to the command's exit (cat of the SAM copy ended)."
  if (unthrottled) {
    zero = 0
    for (i = 1; i <= NR; i++) if (val[i, 8] == 0) zero = 1
    if (zero)
      print "  note: zero reads means blk-throttle is not active on this disk yet (the kernel keeps these\n" \
            "  counters only once some cgroup has had a throttle rule on it): treat them as n/a."
  }
  has_peer = has_copy = 0
  for (i = 1; i <= k; i++) {
    if (tool[i] == peer) has_peer = 1
    if (tool[i] == "copy") has_copy = 1
  }
  print ""
  printf "  median wall time divided by samtools' (vs_samtools)%s%s:\n",
    has_copy ? " and by copy's, the floor (vs_copy)" : "",
    feed == "sam" ? "; median after_eof_s divided by samtools' (eof_vs_samtools)" : ""
  printf "  %-18s %8s %-22s", "command", "wall_s", "vs_samtools"
  if (has_copy) printf "  %7s", "vs_copy"
  if (feed == "sam") printf "  %11s %-22s", "after_eof_s", "eof_vs_samtools"
  printf "\n"
  base = has_peer ? median(peer, 3) : 0
  floor = has_copy ? median("copy", 3) : 0
  eof_base = has_peer ? median(peer, 13) : 0
  for (i = 1; i <= k; i++) {
    w = median(tool[i], 3)
    printf "  %-18s %8.2f %-22s", tool[i], w, vs(tool[i], w, base)
    if (has_copy) printf "  %7s", ratio(w, floor)
    if (feed == "sam") {
      e = median(tool[i], 13)
      printf "  %11.2f %-22s", e, vs(tool[i], e, eof_base)
    }
    printf "\n"
  }
  if (!has_peer) print "  (samtools, the baseline, did not run: add it to --only for the ratios)"
  if (has_peer && runs > 1) {
    # The rounds are interleaved (every command's run r, then run r + 1), so
    # the two runs of a pair are minutes apart: the spread of these ratios is
    # what the machine's drift between rounds leaves of the comparison.
    print ""
    printf "  run by run: wall time divided by samtools' in the same round (rounds 1..%d):\n", runs
    for (i = 1; i <= k; i++) {
      if (tool[i] == peer) continue
      printf "  %-18s", tool[i]
      lo = hi = ""
      for (r = 1; r <= runs; r++) {
        q = ratio(wall[tool[i], r], wall[peer, r])
        printf " %5s", q
        if (q == "n/a") continue
        if (lo == "" || q + 0 < lo + 0) lo = q
        if (hi == "" || q + 0 > hi + 0) hi = q
      }
      if (lo != "") printf "   range %s..%s", lo, hi
      printf "\n"
    }
  }
}
