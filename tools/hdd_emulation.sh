# shellcheck shell=bash
# hdd_emulation.sh: the measured environment of tools/bench.sh. Sourced,
# never run: it defines functions and constants only.
#
# Every measured command runs in a fresh cgroup v1 pair (blkio + memory),
# after `sync; echo 3 > /proc/sys/vm/drop_caches`. The memory cgroup's limit
# keeps the page cache from holding the temporary data; the blkio cgroup
# counts the command's reads from the disk under the work directory and, in
# hdd mode, throttles them to a spinning disk's IOPS and bandwidth while the
# disk's read_ahead_kb is the stock 128. Writes are not throttled. The method
# and its limits: docs/hdd_emulation.md.
#
# Use, in this order (the sourcing script runs under set -euo pipefail and
# defines die MESSAGE, which prints MESSAGE and exits 1):
#   hdd_init MODE IOPS BPS LIMIT DIR   MODE hdd or unthrottled; LIMIT is the
#                          memory limit in bytes; DIR the work directory.
#                          Checks root and cgroup v1, takes the lock, finds
#                          the disk under DIR. Call hdd_cleanup on exit.
#   hdd_begin_run          fresh cgroups, caches dropped, read_ahead_kb set
#   ( hdd_join; exec CMD ) & the measured command, in the run's cgroups
#   hdd_sample             current counters of the run (hdd_reqs, hdd_bytes,
#                          hdd_ticks, hdd_written, hdd_hits, hdd_mem)
#   hdd_end_run            after the command ended: final counters and
#                          memory figures; read_ahead_kb restored, cgroups
#                          removed
#   hdd_stop_run PID       on an interrupt or error: ends the command
#   hdd_cleanup            from the EXIT trap, after hdd_stop_run
#   hdd_disk_of PATH       "NAME MAJ:MIN" of the disk under PATH (any time)
#
# Globals set for the caller (read-only there): hdd_mode, hdd_iops, hdd_bps,
# hdd_mem_limit, hdd_disk (name, e.g. sda), hdd_disk_dev (MAJ:MIN),
# hdd_ra_file, hdd_ra_orig; by hdd_sample and hdd_end_run: hdd_reqs,
# hdd_bytes, hdd_ticks (CPU time in clock ticks, HDD_CLK_TCK a second); by
# hdd_end_run: hdd_cg_max, hdd_failcnt, hdd_oom_kills. Everything else named
# hdd_* is private.

readonly HDD_RA_KB=128  # stock read_ahead_kb of a spinning disk
readonly HDD_LOCK=/run/lock/rocksort-bench-hdd.lock  # held on fd 9
HDD_CLK_TCK=$(getconf CLK_TCK)  # units of hdd_ticks (/proc/PID/stat times)
# shellcheck disable=SC2034  # read by the sourcing script
readonly HDD_CLK_TCK

hdd_cgroups_made=()  # cgroup directories to remove
hdd_ra_changed=0     # 1 while read_ahead_kb is not hdd_ra_orig
hdd_cg_blkio=""
hdd_cg_memory=""

# Mount point of the cgroup v1 hierarchy holding controller $1, or nothing.
hdd_cgroup_v1_mount() {
  awk -v c="$1" '$3 == "cgroup" {
      n = split($4, opt, ",")
      for (i = 1; i <= n; i++) if (opt[i] == c) { print $2; exit }
    }' /proc/self/mounts
}

# Prints "NAME MAJ:MIN" of the whole disk under path $1 (a partition is
# replaced by its disk: blk-throttle limits apply to whole disks); returns 1
# if $1 is not on a block device (tmpfs, overlay, btrfs).
hdd_disk_of() {
  local fs_dev sys
  fs_dev=$(stat -c '%Hd:%Ld' -- "$1") || return 1
  [[ $fs_dev != 0:* && -e /sys/dev/block/$fs_dev ]] || return 1
  sys=$(readlink -f -- "/sys/dev/block/$fs_dev")
  [[ ! -f $sys/partition ]] || sys=${sys%/*}
  printf '%s %s\n' "${sys##*/}" "$(<"$sys/dev")"
}

# Checks that this machine can run the emulation, takes the lock and finds
# the disk under the work directory $5. $1: hdd or unthrottled; $2, $3: the
# read IOPS and bytes/s limits (hdd only); $4: the memory limit in bytes.
# shellcheck disable=SC2034  # hdd_* globals are read by the sourcing script
hdd_init() {
  hdd_mode=$1 hdd_iops=$2 hdd_bps=$3 hdd_mem_limit=$4
  local dir=$5
  ((EUID == 0)) ||
    die "needs root: it runs each command in its own cgroups, drops the page cache and sets read_ahead_kb (docs/hdd_emulation.md)"
  hdd_blkio_root=$(hdd_cgroup_v1_mount blkio)
  hdd_memory_root=$(hdd_cgroup_v1_mount memory)
  [[ -n $hdd_blkio_root && -f $hdd_blkio_root/blkio.throttle.read_iops_device ]] ||
    die "needs a cgroup v1 blkio hierarchy with throttling (none in /proc/self/mounts; cgroup v2-only systems are not supported)"
  [[ -n $hdd_memory_root && -f $hdd_memory_root/memory.limit_in_bytes ]] ||
    die "needs a cgroup v1 memory hierarchy (none in /proc/self/mounts; cgroup v2-only systems are not supported)"
  command -v flock >/dev/null || die "flock not found (apt-get install util-linux)"
  # Two instances would fight over read_ahead_kb and the page cache.
  exec 9>>"$HDD_LOCK" || die "can't open the lock file $HDD_LOCK"
  flock -n 9 ||
    die "another benchmark holds $HDD_LOCK; wait for it to finish (two at once spoil each other's figures)"
  read -r hdd_disk hdd_disk_dev < <(hdd_disk_of "$dir") ||
    die "$dir is not on a block device (tmpfs, overlay and btrfs are not supported); pass --workdir on a disk"
  hdd_ra_file=/sys/block/$hdd_disk/queue/read_ahead_kb
  [[ -w $hdd_ra_file ]] || die "can't find $hdd_ra_file for device $hdd_disk_dev"
  hdd_ra_orig=$(<"$hdd_ra_file")
  [[ $hdd_ra_orig =~ ^[0-9]+$ ]] || die "unexpected content in $hdd_ra_file: $hdd_ra_orig"
}

# Prints the emulation's settings, one per line, indented by two spaces.
hdd_print_settings() {
  if [[ $hdd_mode == hdd ]]; then
    echo "  disk: emulated HDD on $hdd_disk ($hdd_disk_dev): reads throttled, writes not"
    echo "  blkio.throttle.read_iops_device: $hdd_disk_dev $hdd_iops"
    echo "  blkio.throttle.read_bps_device:  $hdd_disk_dev $hdd_bps" \
      "($(awk -v b="$hdd_bps" 'BEGIN { printf "%.1f", b / 1048576 }') MiB/s)"
    echo "  $hdd_ra_file: $HDD_RA_KB during each run (now $hdd_ra_orig; restored after each run)"
  else
    echo "  disk: unthrottled $hdd_disk ($hdd_disk_dev): no blkio limits (a rule of 0 so that reads are counted), read_ahead_kb left at $hdd_ra_orig"
  fi
  echo "  memory.limit_in_bytes: $hdd_mem_limit ($((hdd_mem_limit / 1048576)) MiB)"
  echo "  before each run: sync; echo 3 > /proc/sys/vm/drop_caches"
  echo "  cgroups: $hdd_blkio_root/rocksort-bench-XXXXXX and" \
    "$hdd_memory_root/rocksort-bench-XXXXXX (a fresh pair per run)"
}

# Writes $1 into the control file $2; dies if the kernel refuses it.
hdd_write() {
  echo "$1" >"$2" || die "can't write '$1' to $2"
}

# Creates the run's blkio and memory cgroups and sets their limits.
hdd_make_cgroups() {
  local base i
  for ((i = 0; i < 10; i++)); do
    base=$(mktemp -u rocksort-bench-XXXXXX)
    [[ -e $hdd_blkio_root/$base || -e $hdd_memory_root/$base ]] && continue
    mkdir -- "$hdd_blkio_root/$base" || die "can't create cgroup $hdd_blkio_root/$base"
    hdd_cgroups_made+=("$hdd_blkio_root/$base")
    mkdir -- "$hdd_memory_root/$base" || die "can't create cgroup $hdd_memory_root/$base"
    hdd_cgroups_made+=("$hdd_memory_root/$base")
    hdd_cg_blkio=$hdd_blkio_root/$base
    hdd_cg_memory=$hdd_memory_root/$base
    hdd_write "$hdd_mem_limit" "$hdd_cg_memory/memory.limit_in_bytes"
    if [[ $hdd_mode == hdd ]]; then
      hdd_write "$hdd_disk_dev $hdd_iops" "$hdd_cg_blkio/blkio.throttle.read_iops_device"
      hdd_write "$hdd_disk_dev $hdd_bps" "$hdd_cg_blkio/blkio.throttle.read_bps_device"
      if ! grep -qx "$hdd_disk_dev $hdd_iops" "$hdd_cg_blkio/blkio.throttle.read_iops_device" ||
        ! grep -qx "$hdd_disk_dev $hdd_bps" "$hdd_cg_blkio/blkio.throttle.read_bps_device"; then
        die "the kernel did not keep the throttle settings in $hdd_cg_blkio"
      fi
    else
      # A rule of 0 (no limit): the kernel counts a disk's requests only once
      # some cgroup has had a throttle rule on it, which after a fresh boot
      # no unthrottled run would otherwise give it.
      hdd_write "$hdd_disk_dev 0" "$hdd_cg_blkio/blkio.throttle.read_iops_device"
    fi
    return 0
  done
  die "can't find a free cgroup name"
}

# Prepares one run: fresh cgroups, dirty data written back, page cache
# dropped and, in hdd mode, read_ahead_kb set to the stock value.
hdd_begin_run() {
  hdd_make_cgroups
  sync
  echo 3 >/proc/sys/vm/drop_caches
  if [[ $hdd_mode == hdd ]]; then
    hdd_ra_changed=1
    hdd_write "$HDD_RA_KB" "$hdd_ra_file"
  fi
}

# Run in the measured command's subshell, before it execs the command:
# closes the lock (it stays with the harness) and moves the subshell into the
# run's cgroups, so the command, its threads and children are accounted
# there. Returns 1 if that fails.
hdd_join() {
  exec 9>&-
  printf '%d\n' "$BASHPID" >"$hdd_cg_blkio/cgroup.procs" || return 1
  printf '%d\n' "$BASHPID" >"$hdd_cg_memory/cgroup.procs" || return 1
}

# Value of the "MAJ:MIN Read N" line of blkio.throttle stats file $1 (0 if
# none: the kernel keeps these counters for a disk only once some cgroup has
# had a throttle rule on it, which hdd_make_cgroups sees to in both modes).
hdd_blkio_reads() {
  # The field as it is: "print n + 0" would print 2.1e+09 above 2^31.
  awk -v d="$hdd_disk_dev" '$1 == d && $2 == "Read" { n = $3 }
    END { print (n == "" ? 0 : n) }' "$1"
}

# CPU time (user + sys, clock ticks) of the processes now in the run's memory
# cgroup. The CPU of processes that have exited is lost: only the last
# interval of a run, as each measured command is one process.
hdd_cpu_ticks() {
  local pid stat ticks=0 f
  for pid in $(<"$hdd_cg_memory/cgroup.procs"); do
    # Fields after the ")" that closes the command name: utime is the 12th.
    { stat=$(<"/proc/$pid/stat"); } 2>/dev/null || continue  # exited meanwhile
    read -r -a f <<<"${stat##*) }"
    ticks=$((ticks + f[11] + f[12]))
  done
  echo "$ticks"
}

# Sets hdd_reqs, hdd_bytes (reads from the disk so far) and hdd_ticks (CPU
# ticks of the processes now running) for the current run; hdd_written
# (bytes the whole disk has written since boot: a cgroup v1 blkio group is
# not charged for the kernel's writeback), hdd_hits (times the run's memory
# cgroup reached its limit) and hdd_mem ("CACHE DIRTY WRITEBACK ANON" bytes
# the cgroup holds now, from its memory.stat).
# shellcheck disable=SC2034  # read by the sourcing script
hdd_sample() {
  hdd_reqs=$(hdd_blkio_reads "$hdd_cg_blkio/blkio.throttle.io_serviced")
  hdd_bytes=$(hdd_blkio_reads "$hdd_cg_blkio/blkio.throttle.io_service_bytes")
  hdd_ticks=$(hdd_cpu_ticks)
  local stat
  read -r -a stat <"/sys/block/$hdd_disk/stat"
  hdd_written=$((stat[6] * 512))
  hdd_hits=$(<"$hdd_cg_memory/memory.failcnt")
  hdd_mem=$(awk '{ v[$1] = $2 } END { printf "%d %d %d %d", v["cache"], v["dirty"],
    v["writeback"], v["rss"] }' "$hdd_cg_memory/memory.stat")
}

# Restores read_ahead_kb if a run changed it.
hdd_restore_readahead() {
  if ((hdd_ra_changed)); then
    echo "$hdd_ra_orig" >"$hdd_ra_file" && hdd_ra_changed=0
  fi
}

# Removes the cgroups made so far (waiting up to 2 s each for the kernel to
# let go of exited processes); complains about any left.
hdd_remove_cgroups() {
  local cg i left=()
  for cg in "${hdd_cgroups_made[@]}"; do
    for ((i = 0; i < 20; i++)); do
      [[ -d $cg ]] || break
      rmdir -- "$cg" 2>/dev/null && break
      sleep 0.1
    done
    [[ -d $cg ]] && left+=("$cg")
  done
  hdd_cgroups_made=("${left[@]}")
  ((${#left[@]} == 0)) || echo "hdd_emulation: could not remove cgroup(s): ${left[*]}" >&2
}

# Ends a run whose command has exited: restores read_ahead_kb, reads the
# final counters (hdd_reqs, hdd_bytes) and the memory cgroup's peak usage
# (hdd_cg_max, bytes), limit hits (hdd_failcnt) and OOM kills
# (hdd_oom_kills), then removes the cgroups.
# shellcheck disable=SC2034  # read by the sourcing script
hdd_end_run() {
  hdd_restore_readahead
  hdd_reqs=$(hdd_blkio_reads "$hdd_cg_blkio/blkio.throttle.io_serviced")
  hdd_bytes=$(hdd_blkio_reads "$hdd_cg_blkio/blkio.throttle.io_service_bytes")
  hdd_cg_max=$(<"$hdd_cg_memory/memory.max_usage_in_bytes")
  hdd_failcnt=$(<"$hdd_cg_memory/memory.failcnt")
  hdd_oom_kills=$(awk '$1 == "oom_kill" { print $2 }' "$hdd_cg_memory/memory.oom_control")
  hdd_remove_cgroups
}

# Sends signal $1 to every process in the cgroups made so far (only measured
# commands and their children are ever put there).
hdd_signal_cgroups() {
  local sig=$1 cg pid
  for cg in "${hdd_cgroups_made[@]}"; do
    [[ -f $cg/cgroup.procs ]] || continue
    while read -r pid; do
      kill "-$sig" "$pid" 2>/dev/null || true
    done <"$cg/cgroup.procs"
  done
}

# True when no process is left in the cgroups made so far.
hdd_cgroups_empty() {
  local cg
  for cg in "${hdd_cgroups_made[@]}"; do
    [[ ! -s $cg/cgroup.procs ]] || return 1
  done
}

# Stops a measured command still running (interrupt or error): SIGTERM to it
# (background job $1, if given) and everything in the cgroups, SIGKILL after
# 10 s; a command given time cleans up its temporary data.
hdd_stop_run() {
  local child=${1:-} i
  hdd_cgroups_empty && [[ -z $child ]] && return 0
  hdd_signal_cgroups TERM
  [[ -z $child ]] || kill -TERM "$child" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    hdd_cgroups_empty && break
    sleep 0.1
  done
  if ! hdd_cgroups_empty; then
    hdd_signal_cgroups KILL
    for ((i = 0; i < 50; i++)); do
      hdd_cgroups_empty && break
      sleep 0.1
    done
  fi
  [[ -z $child ]] || wait "$child" 2>/dev/null || true
}

# Undoes what the emulation changed on the machine: read_ahead_kb and the
# cgroups. For the EXIT trap, after hdd_stop_run; never fails.
hdd_cleanup() {
  hdd_restore_readahead || true
  if ((hdd_ra_changed)); then
    echo "hdd_emulation: could not restore $hdd_ra_file to $hdd_ra_orig; do it by hand" >&2
  fi
  hdd_remove_cgroups || true
}
