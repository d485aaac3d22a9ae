#!/usr/bin/env bash
# Installs rocksort's dependencies (Debian 12 packages), builds it, and then
# either sorts the bundled example or runs the whole test suite.
#
#   bash scripts/setup.sh example   # install, build, sort examples/example.bam
#   bash scripts/setup.sh test      # install, build, run every test (CI):
#                                   # once, under ASan+UBSan but for the few
#                                   # that cannot run there (those in the release
#                                   # build), then each libFuzzer target for 20 s
#
# Needs root (or sudo) for apt-get on a machine that lacks the packages.
set -euo pipefail

mode="${1:-}"
case "$mode" in
  example|test) ;;
  *) echo "usage: bash scripts/setup.sh example|test" >&2; exit 1 ;;
esac

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$repo/build"

packages=(
  build-essential cmake pkg-config
  librocksdb-dev libsnappy-dev liblz4-dev libzstd-dev libxxhash-dev libhts-dev libdeflate-dev
  libabsl-dev libgtest-dev
  samtools time
)
# The sanitizer and fuzzing runs of the test mode build with clang's runtimes;
# the progress line is tested on a real terminal, a tmux pane.
if [ "$mode" = test ]; then packages+=(clang libclang-rt-14-dev tmux); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

jobs="$(nproc)"
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROCKSORT_BUILD_TESTS=ON >/dev/null

if [ "$mode" = example ]; then
  cmake --build "$build" -j "$jobs" --target rocksort
  out="$repo/build/example.sorted.bam"
  "$build/tools/rocksort" -v -@ "$jobs" -o "$out" "$repo/examples/example.bam"
  samtools quickcheck "$out"
  echo "setup: sorted examples/example.bam -> build/example.sorted.bam"
  # awk, not head: head exits after three lines, samtools then dies of
  # SIGPIPE and pipefail turned that into exit status 141 for the script.
  samtools view "$out" | awk 'NR <= 3' | cut -f 1-9
else
  # Every test runs once. Most run under ASan+UBSan (scripts/sanitize.sh asan:
  # the same compiler, at -O1, with the sanitizers' checks on every access and
  # every undefined operation); the few that mode cannot run
  # (test/asan_excluded.regex, reasons in sanitize.sh) run here, in the
  # release build, with the binaries they need.
  cmake --build "$build" -j "$jobs" --target rocksort gen_reads keycodec_test orders_test \
    reliability_test
  (cd "$build" && ctest -j "$jobs" --output-on-failure --timeout 900 \
    -R "$(cat "$repo/test/asan_excluded.regex")")
  bash "$repo/scripts/sanitize.sh" asan
  bash "$repo/scripts/sanitize.sh" fuzz 20
fi
