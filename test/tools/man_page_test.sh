#!/usr/bin/env bash
# The man page documents every option `rocksort --help` lists, and lists no
# option the binary does not know.
#   man_page_test.sh ROCKSORT_BINARY MAN_PAGE
set -euo pipefail
binary=$1 page=$2
# Long options as the help prints them, e.g. "--write-index".
help_options=$("$binary" --help | grep -oE -- '--[a-zA-Z][a-zA-Z-]+' | sort -u)
# Long options in the page, from its option headings (.B/.BI/.BR lines)
# and font-switched text (\fB--progress\fR), with roff's "\-" undone.
page_options=$(sed 's/\\-/-/g' "$page" | grep -E '^\.(B|BI|BR|TP)|\\fB--' |
  grep -oE -- '--[a-zA-Z][a-zA-Z-]+' | sort -u)
status=0
for o in $help_options; do
  grep -qx -- "$o" <<<"$page_options" || { echo "$page: missing $o (listed by --help)"; status=1; }
done
for o in $page_options; do
  grep -qx -- "$o" <<<"$help_options" || { echo "$page: documents $o, which --help does not list"; status=1; }
done
# Short options: every "-x" the help starts a line with is in the page.
for o in $("$binary" --help | grep -oE -- '^  -[a-zA-Z@]' | tr -d ' ' | sort -u); do
  grep -qE -- "^\.(B|BI|BR) +\\\\?${o}( |$|,)|^\.(B|BI|BR) +\"\\\\?${o}" "$page" ||
    sed 's/\\-/-/g' "$page" | grep -qE -- "^\.(B|BI|BR) +${o}( |$|,)" ||
    { echo "$page: missing $o (listed by --help)"; status=1; }
done
[[ $status -eq 0 ]] && echo "man page and --help agree: $(wc -w <<<"$help_options") long options"
exit $status
