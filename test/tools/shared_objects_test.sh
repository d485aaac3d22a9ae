#!/usr/bin/env bash
# The rocksort binary's shared objects: htslib, what htslib's own shared
# object loads (zlib, bzip2, liblzma, libdeflate; htscodecs through it) and
# libc, nothing else. Everything else it links comes from Debian's static
# archives, so that a cold start pages in fewer files (docs/design.md,
# Start). Fails naming each other shared object the binary needs.
set -euo pipefail
binary=$1
needed=$(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p')
if [[ -z $needed ]]; then
  echo "no shared objects read from $binary (readelf -d)" >&2
  exit 1
fi
status=0
for object in $needed; do
  case $object in
    libhts.so.* | libz.so.* | libbz2.so.* | liblzma.so.* | libdeflate.so.* | \
      libm.so.* | libc.so.* | ld-linux-*.so.*) ;;
    *)
      echo "$binary needs $object: only htslib, what htslib loads and libc are expected" >&2
      status=1
      ;;
  esac
done
exit $status
